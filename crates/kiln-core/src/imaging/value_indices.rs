//! scipy.ndimage.value_indices: where each distinct value of an integer array lies.
//!
//! The groups are the distinct values in ascending order, each with the coordinates of its
//! elements in row-major order. Values spanning a range within a couple of times the element
//! count are counted into place (one pass to count, one to place each element's coordinates,
//! as scipy's C does); wider ranges (sparse 64-bit ids, say) are sorted stably instead, which
//! scipy refuses for lack of memory.

use super::rank_value::{values_from_bytes, NdDType, RankValue};
use crate::error::{Error, Result};

/// An integer element type of value_indices' input.
pub trait IndexValue: RankValue + Ord {
    /// The value, exactly.
    fn wide(self) -> i128;
}

macro_rules! index_value {
    ($($t:ty),*) => {$(
        impl IndexValue for $t {
            fn wide(self) -> i128 {
                i128::from(self)
            }
        }
    )*};
}
index_value!(i8, i16, i32, i64, u8, u16, u32, u64);

/// The groups of equal values of an array: group `g` holds positions
/// `starts[g]..starts[g + 1]` (the last up to the element count) of each axis's coordinates,
/// and its value is the element at flat index `first[g]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValueGroups {
    /// Where each group starts.
    pub starts: Vec<usize>,
    /// The flat index of each group's first element (to read its value).
    pub first: Vec<usize>,
}

/// The coordinates of flat index `i` in `shape`, into `c`.
fn unravel(mut i: usize, shape: &[usize], c: &mut [usize]) {
    for a in (0..shape.len()).rev() {
        c[a] = i % shape[a];
        i /= shape[a];
    }
}

/// The runs of equal values along the last axis, in row-major order: `f(outer coordinates,
/// flat index of the line's start, start..end in the line, value)`.
fn for_runs<T: IndexValue>(
    values: &[T],
    shape: &[usize],
    mut f: impl FnMut(&[usize], usize, usize, usize, T),
) {
    let Some((&len, outer)) = shape.split_last() else {
        f(&[], 0, 0, 1, values[0]);
        return;
    };
    let mut c = vec![0usize; outer.len()];
    for (li, line) in values.chunks_exact(len).enumerate() {
        let mut i = 0;
        while i < len {
            let v = line[i];
            let j = line[i..].iter().position(|&x| x != v).map_or(len, |k| i + k);
            f(&c, li * len, i, j, v);
            i = j;
        }
        for a in (0..c.len()).rev() {
            c[a] += 1;
            if c[a] < outer[a] {
                break;
            }
            c[a] = 0;
        }
    }
}

/// The groups of equal values in `values` (row-major `shape`), with every element's
/// coordinates written into `coords` (axis `a` at `a * n..(a + 1) * n`, `n` the element
/// count), grouped by value in ascending order, row-major within a group.
pub fn value_indices<T: IndexValue>(
    values: &[T],
    shape: &[usize],
    coords: &mut [i64],
) -> Result<ValueGroups> {
    let n: usize = shape.iter().product();
    let ndim = shape.len();
    if values.len() != n || coords.len() != n * ndim {
        return Err(Error::invalid(
            "value_indices",
            format!(
                "shape {shape:?} has {n} elements, got {} values and {} coordinates",
                values.len(),
                coords.len()
            ),
        ));
    }
    let mut g = ValueGroups {
        starts: Vec::new(),
        first: Vec::new(),
    };
    let (Some(&lo), Some(&hi)) = (values.iter().min(), values.iter().max()) else {
        return Ok(g);
    };
    let range = hi.wide() - lo.wide() + 1;
    if range <= 2 * n as i128 + 1024 {
        // counted into place, a run of equal values at a time
        let slot_of = |v: T| (v.wide() - lo.wide()) as usize;
        let mut slot = vec![0usize; range as usize];
        let mut first = vec![usize::MAX; range as usize];
        for_runs(values, shape, |_, start, i, j, v| {
            let s = slot_of(v);
            if slot[s] == 0 {
                first[s] = start + i;
            }
            slot[s] += j - i;
        });
        let mut at = 0;
        for (s, count) in slot.iter_mut().enumerate() {
            if *count > 0 {
                g.starts.push(at);
                g.first.push(first[s]);
            }
            let k = *count;
            *count = at;
            at += k;
        }
        for_runs(values, shape, |c, _, i, j, v| {
            let p = slot[slot_of(v)];
            slot[slot_of(v)] += j - i;
            if ndim > 0 {
                let last = &mut coords[(ndim - 1) * n + p..(ndim - 1) * n + p + (j - i)];
                for (o, x) in last.iter_mut().zip(i..j) {
                    *o = x as i64;
                }
                for (a, &x) in c.iter().enumerate() {
                    coords[a * n + p..a * n + p + (j - i)].fill(x as i64);
                }
            }
        });
    } else {
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by_key(|&i| values[i]); // stable: row-major within a value
        let mut c = vec![0usize; ndim];
        for (p, &i) in order.iter().enumerate() {
            if p == 0 || values[i] != values[order[p - 1]] {
                g.starts.push(p);
                g.first.push(i);
            }
            unravel(i, shape, &mut c);
            for a in 0..ndim {
                coords[a * n + p] = c[a] as i64;
            }
        }
    }
    Ok(g)
}

/// [`value_indices`] over native-endian bytes of an integer `dtype`.
pub fn value_indices_bytes(
    bytes: &[u8],
    dtype: NdDType,
    shape: &[usize],
    coords: &mut [i64],
) -> Result<ValueGroups> {
    fn run<T: IndexValue>(bytes: &[u8], shape: &[usize], coords: &mut [i64]) -> Result<ValueGroups> {
        match bytemuck::try_cast_slice::<u8, T>(bytes) {
            Ok(v) => value_indices(v, shape, coords),
            Err(_) => value_indices(&values_from_bytes::<T>("value_indices", bytes)?, shape, coords),
        }
    }
    match dtype {
        NdDType::I8 => run::<i8>(bytes, shape, coords),
        NdDType::I16 => run::<i16>(bytes, shape, coords),
        NdDType::I32 => run::<i32>(bytes, shape, coords),
        NdDType::I64 => run::<i64>(bytes, shape, coords),
        NdDType::U8 => run::<u8>(bytes, shape, coords),
        NdDType::U16 => run::<u16>(bytes, shape, coords),
        NdDType::U32 => run::<u32>(bytes, shape, coords),
        NdDType::U64 => run::<u64>(bytes, shape, coords),
        d => Err(Error::invalid(
            "value_indices",
            format!("the array must be of an integer type, got {d}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(values: &[i64], shape: &[usize]) -> Vec<(i64, Vec<Vec<i64>>)> {
        let mut keys: Vec<i64> = values.to_vec();
        keys.sort();
        keys.dedup();
        let mut c = vec![0; shape.len()];
        keys.into_iter()
            .map(|k| {
                let mut per = vec![Vec::new(); shape.len()];
                for (i, _) in values.iter().enumerate().filter(|(_, &v)| v == k) {
                    unravel(i, shape, &mut c);
                    for a in 0..shape.len() {
                        per[a].push(c[a] as i64);
                    }
                }
                (k, per)
            })
            .collect()
    }

    fn groups(values: &[i64], shape: &[usize]) -> Vec<(i64, Vec<Vec<i64>>)> {
        let n = values.len();
        let mut coords = vec![-1i64; n * shape.len()];
        let g = value_indices(values, shape, &mut coords).unwrap();
        (0..g.starts.len())
            .map(|k| {
                let end = g.starts.get(k + 1).copied().unwrap_or(n);
                let per = coords.chunks(n).map(|c| c[g.starts[k]..end].to_vec()).collect();
                (values[g.first[k]], per)
            })
            .collect()
    }

    #[test]
    fn counted_and_sorted_groups_match_a_plain_scan() {
        let mut s = 12345u64;
        let mut rnd = |m: u64| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (s >> 33) % m
        };
        for shape in [vec![7usize], vec![4, 5], vec![3, 2, 4], vec![2, 1, 3, 2]] {
            let n: usize = shape.iter().product();
            let dense: Vec<i64> = (0..n).map(|_| rnd(5) as i64 - 2).collect();
            assert_eq!(groups(&dense, &shape), naive(&dense, &shape));
            // a range far wider than the element count: the sorted path
            let sparse: Vec<i64> = (0..n)
                .map(|_| [i64::MIN, -7, 1 << 50, i64::MAX][rnd(4) as usize])
                .collect();
            assert_eq!(groups(&sparse, &shape), naive(&sparse, &shape));
        }
        let g = value_indices(&[5u8], &[], &mut []).unwrap();
        assert_eq!((g.starts, g.first), (vec![0], vec![0]));
        assert!(value_indices::<u8>(&[], &[0, 3], &mut [])
            .unwrap()
            .starts
            .is_empty());
    }
}
