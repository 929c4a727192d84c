//! [`super::label`] against a plain reference: a breadth-first flood fill over every
//! neighbour offset of the structure, groups numbered as their first element is met in
//! row-major order; in one slab and in several (the seams), 1-D to 4-D, random structures.
//! Also [`crate::imaging::objects::find_objects`]'s boxes and scipy's value rules.

use super::*;
use crate::imaging::objects::{find_objects, ObjectBox};
use std::collections::VecDeque;

/// A small deterministic generator (no dev-dependency).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn mask(&mut self, n: usize, percent: u64) -> Vec<u8> {
        (0..n).map(|_| u8::from(self.next() % 100 < percent)).collect()
    }
}

fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for a in (0..shape.len().saturating_sub(1)).rev() {
        s[a] = s[a + 1] * shape[a + 1];
    }
    s
}

fn coords(mut i: usize, shape: &[usize]) -> Vec<usize> {
    let mut c = vec![0; shape.len()];
    for a in (0..shape.len()).rev() {
        c[a] = i % shape[a];
        i /= shape[a];
    }
    c
}

/// Flood fill: every offset of the structure (both halves), groups numbered in row-major
/// order of their first element.
fn reference(mask: &[u8], shape: &[usize], s: &Structure) -> (Vec<i64>, usize) {
    let n = shape.len();
    let offs: Vec<Vec<isize>> = (0..s.mask().len())
        .filter(|&k| s.mask()[k] && k != s.mask().len() / 2)
        .map(|k| offsets_of(k, n))
        .collect();
    let st = strides(shape);
    let neighbours = |i: usize| -> Vec<usize> {
        let c = coords(i, shape);
        offs.iter()
            .filter_map(|d| {
                let mut j = 0isize;
                for a in 0..n {
                    let x = c[a] as isize + d[a];
                    if x < 0 || x >= shape[a] as isize {
                        return None;
                    }
                    j += x * st[a] as isize;
                }
                Some(j as usize)
            })
            .collect()
    };
    let mut out = vec![0i64; mask.len()];
    let mut labels = 0;
    for i in 0..mask.len() {
        if mask[i] == 0 || out[i] != 0 {
            continue;
        }
        labels += 1;
        out[i] = labels as i64;
        let mut q = VecDeque::from([i]);
        while let Some(p) = q.pop_front() {
            for j in neighbours(p) {
                if mask[j] != 0 && out[j] == 0 {
                    out[j] = labels as i64;
                    q.push_back(j);
                }
            }
        }
    }
    (out, labels)
}

/// A random centrosymmetric structure of `ndim` axes.
fn random_structure(r: &mut Lcg, ndim: usize) -> Structure {
    let n = 3usize.pow(ndim as u32);
    let mut m = vec![false; n];
    for k in 0..=n / 2 {
        let on = r.next() % 2 == 0;
        m[k] = on;
        m[n - 1 - k] = on;
    }
    Structure::new(ndim, m).unwrap()
}

fn check(mask: &[u8], shape: &[usize], s: &Structure) {
    let (want, labels) = reference(mask, shape, s);
    for slabs in [1, 2, 3, 7] {
        let mut out = vec![-5i64; mask.len()];
        let got = label_in_slabs(mask, shape, s, &mut out, slabs).unwrap();
        assert_eq!(
            out,
            want,
            "shape {shape:?} slabs {slabs} structure {:?}",
            s.mask()
        );
        assert_eq!(got, labels);
        let mut out32 = vec![-5i32; mask.len()];
        label_in_slabs(mask, shape, s, &mut out32, slabs).unwrap();
        assert!(out32.iter().zip(&want).all(|(&a, &b)| i64::from(a) == b));
    }
}

#[test]
fn random_masks_and_structures_match_the_flood_fill() {
    let mut r = Lcg(7);
    let shapes: &[&[usize]] = &[
        &[1],
        &[13],
        &[1, 1],
        &[5, 1],
        &[1, 6],
        &[7, 9],
        &[16, 5],
        &[3, 4, 5],
        &[6, 1, 7],
        &[2, 3, 2, 3],
        &[4, 3, 3, 5],
        // rows across the 64-element words of the run finder, and with 8-byte tails
        &[5, 63],
        &[2, 64],
        &[4, 65],
        &[3, 130],
        &[1, 200],
        &[2, 3, 129],
    ];
    for shape in shapes {
        let n: usize = shape.iter().product();
        for trial in 0..12 {
            let percent = [20, 45, 60, 85][trial % 4];
            let mask = r.mask(n, percent);
            for conn in 1..=shape.len() {
                check(&mask, shape, &Structure::connectivity(shape.len(), conn).unwrap());
            }
            check(&mask, shape, &random_structure(&mut r, shape.len()));
        }
    }
}

#[test]
fn scipy_docstring_example() {
    let a: Vec<u8> = vec![
        0, 0, 1, 1, 0, 0, 0, 0, 0, 1, 0, 0, 1, 1, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0,
    ];
    let mut out = vec![0i32; 24];
    let s = Structure::connectivity(2, 1).unwrap();
    let c = label(&a, &[4, 6], &s, &mut out).unwrap();
    assert_eq!(c, 4);
    assert_eq!(
        out,
        [0, 0, 1, 1, 0, 0, 0, 0, 0, 1, 0, 0, 2, 2, 0, 0, 3, 0, 0, 0, 0, 4, 0, 0]
    );
    let c = label(&a, &[4, 6], &Structure::connectivity(2, 2).unwrap(), &mut out).unwrap();
    assert_eq!(c, 2);
    assert_eq!(
        out,
        [0, 0, 1, 1, 0, 0, 0, 0, 0, 1, 0, 0, 2, 2, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0]
    );
}

#[test]
fn a_large_image_labels_in_parallel_as_in_one_slab() {
    let mut r = Lcg(11);
    let shape = [300, 257];
    let mask = r.mask(300 * 257, 55);
    let s = Structure::connectivity(2, 2).unwrap();
    let mut one = vec![0i32; mask.len()];
    let a = label_in_slabs(&mask, &shape, &s, &mut one, 1).unwrap();
    let mut par = vec![0i32; mask.len()];
    let b = label(&mask, &shape, &s, &mut par).unwrap();
    assert_eq!(a, b);
    assert_eq!(one, par);
    // a U that merges at the bottom row, across slabs: one group
    let mut u = vec![0u8; 64 * 64];
    for y in 0..64 {
        u[y * 64] = 1;
        u[y * 64 + 63] = 1;
    }
    u[63 * 64..].fill(1);
    let mut out = vec![0i64; u.len()];
    let c = label_in_slabs(
        &u,
        &[64, 64],
        &Structure::connectivity(2, 1).unwrap(),
        &mut out,
        5,
    )
    .unwrap();
    assert_eq!(c, 1);
}

#[test]
fn zero_d_empty_and_structures_without_neighbours() {
    let s0 = Structure::connectivity(0, 1).unwrap();
    let mut o = [9i32];
    assert_eq!(label(&[3], &[], &s0, &mut o).unwrap(), 1);
    assert_eq!(o, [1]);
    assert_eq!(label(&[0], &[], &s0, &mut o).unwrap(), 0);
    assert_eq!(o, [0]);
    let mut e: [i32; 0] = [];
    assert_eq!(
        label(&[], &[0, 4], &Structure::connectivity(2, 1).unwrap(), &mut e).unwrap(),
        0
    );
    // no neighbours: every element its own group
    let none = Structure::new(2, vec![false; 9]).unwrap();
    let mut o = vec![0i32; 4];
    assert_eq!(label(&[1, 1, 0, 1], &[2, 2], &none, &mut o).unwrap(), 3);
    assert_eq!(o, [1, 2, 0, 3]);
}

#[test]
fn bad_structures_and_sizes_are_refused() {
    let asym = [false, true, false, false, true, true, false, false, false];
    let e = Structure::new(2, asym.to_vec()).unwrap_err().to_string();
    assert!(e.contains("centrosymmetric"), "{e}");
    assert!(Structure::new(2, vec![true; 8]).is_err());
    let s = Structure::connectivity(2, 1).unwrap();
    let mut o = vec![0i32; 4];
    assert!(label(&[1, 1, 1, 1], &[4], &s, &mut o)
        .unwrap_err()
        .to_string()
        .contains("axes"));
    assert!(label(&[1, 1, 1], &[2, 2], &s, &mut o).is_err());
}

#[test]
fn find_objects_boxes_and_scipy_value_rules() {
    let a: Vec<i64> = vec![
        2, 2, 2, 0, 0, 3, 2, 2, 2, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 1, 0,
    ];
    let b = find_objects(&a, &[5, 6], 3).unwrap();
    let boxes: Vec<(usize, Vec<(usize, usize)>)> = b.into_iter().map(|o| (o.index, o.bounds)).collect();
    assert_eq!(
        boxes,
        [
            (0, vec![(2, 5), (2, 5)]),
            (1, vec![(0, 2), (0, 3)]),
            (2, vec![(0, 1), (5, 6)])
        ]
    );
    assert_eq!(find_objects(&a, &[5, 6], 2).unwrap().len(), 2);
    // floats: v - 1 truncated toward zero (0.5 and 1.9 are object 0), NaN none
    let f = [-0.5f64, 0.5, 1.9, f64::NAN, 3.2];
    let got: Vec<(usize, Vec<(usize, usize)>)> = find_objects(&f, &[5], 5)
        .unwrap()
        .into_iter()
        .map(|o| (o.index, o.bounds))
        .collect();
    assert_eq!(got, [(0, vec![(1, 3)]), (2, vec![(4, 5)])]);
    // uint64 0 wraps to no object; a huge max_label keeps memory to the objects present
    let u = [0u64, 1, u64::MAX];
    assert_eq!(
        find_objects(&u, &[3], usize::MAX).unwrap(),
        [ObjectBox {
            index: 0,
            bounds: vec![(1, 2)]
        }]
    );
    let big = [1i64 << 40, 1];
    let got = find_objects(&big, &[2], usize::MAX).unwrap();
    assert_eq!(
        got.iter().map(|o| o.index).collect::<Vec<_>>(),
        [0, (1 << 40) - 1]
    );
    // 0-D: an empty box
    assert_eq!(
        find_objects(&[1u8], &[], 1).unwrap(),
        [ObjectBox {
            index: 0,
            bounds: vec![]
        }]
    );
}

#[test]
fn backward3_lists_the_neighbours_before_the_centre_as_3_axis_offsets() {
    let faces2 = Structure::connectivity(2, 1).unwrap();
    assert_eq!(faces2.backward3().unwrap(), [[0, -1, 0], [0, 0, -1]]);
    let line = Structure::connectivity(1, 1).unwrap();
    assert_eq!(line.backward3().unwrap(), [[0, 0, -1]]);
    let full3 = Structure::connectivity(3, 3).unwrap();
    let b = full3.backward3().unwrap();
    assert_eq!(b.len(), 13);
    assert!(b.iter().all(|o| *o < [0, 0, 0]));
    assert_eq!(Structure::connectivity(4, 1).unwrap().backward3(), None);
}

#[test]
fn row_bits_reads_every_non_zero_byte() {
    let mut r = Lcg(11);
    let mut bits = Vec::new();
    for len in [0usize, 1, 7, 8, 9, 63, 64, 65, 127, 128, 200] {
        for _ in 0..20 {
            // any byte value: 0x80 alone, 0x7f, 0x01 and 0xff must all read as set
            let row: Vec<u8> = (0..len)
                .map(|_| match r.next() % 6 {
                    0 | 1 => 0,
                    2 => 0x80,
                    3 => 0x7f,
                    4 => 1,
                    _ => (r.next() % 256) as u8,
                })
                .collect();
            super::row_bits(&row, &mut bits);
            assert_eq!(bits.len(), len.div_ceil(64));
            for (i, &m) in row.iter().enumerate() {
                assert_eq!(
                    bits[i / 64] >> (i % 64) & 1 == 1,
                    m != 0,
                    "len {len}, byte {i} = {m}"
                );
            }
            if len % 64 != 0 {
                assert_eq!(bits[len / 64] >> (len % 64), 0, "bits past the row");
            }
            // next_bit finds every run boundary
            let mut i = 0;
            while i < len {
                let a = super::next_bit(&bits, i, true, len);
                assert_eq!(a, (i..len).find(|&j| row[j] != 0).unwrap_or(len));
                if a == len {
                    break;
                }
                let b = super::next_bit(&bits, a, false, len);
                assert_eq!(b, (a..len).find(|&j| row[j] == 0).unwrap_or(len));
                i = b;
            }
        }
    }
}
