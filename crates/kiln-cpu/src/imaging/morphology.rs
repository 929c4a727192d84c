//! Binary morphology on the CPU ([`BinarySpec`], scipy.ndimage semantics): the reference
//! for the GPU. Masks are `u8` 0/1 planes; one step maps every pixel through the AND (OR)
//! of its window, rows in parallel; iterations repeat the step.

use super::rank::check_shape;
use kiln_core::imaging::morphology::BinarySpec;
use kiln_core::Result;
use rayon::prelude::*;

use crate::{CpuStorage, StorageElement};

/// The truth of every element (non-zero, NaN included, as numpy's `bool`), as 0/1.
pub fn truth(x: &CpuStorage) -> Vec<u8> {
    fn t<T: StorageElement>(v: &[T]) -> Vec<u8> {
        v.par_iter().map(|&x| u8::from(x.to_f64() != 0.0)).collect()
    }
    crate::with_cpu_storage!(x, |v| t(v))
}

/// One step of `spec` on the 0/1 plane `src` of shape `(d, h, w)`: the output and whether
/// any pixel changed. Where `mask` is given and 0 the pixel keeps its input.
pub fn binary_step(src: &[u8], shape: [usize; 3], spec: &BinarySpec, mask: Option<&[u8]>) -> (Vec<u8>, bool) {
    let [d, h, w] = shape;
    let offs = spec.offsets();
    let border = u8::from(spec.border_value);
    let mut out = vec![0u8; src.len()];
    let changed = out
        .par_chunks_mut(w)
        .enumerate()
        .map(|(row, orow)| {
            let (z, y) = (row / h, row % h);
            let mut changed = false;
            for (x, o) in orow.iter_mut().enumerate() {
                let p = row * w + x;
                let inp = src[p];
                if mask.is_some_and(|m| m[p] == 0) {
                    *o = inp;
                    continue;
                }
                let read = |off: &[isize; 3]| -> u8 {
                    match (inside(z, off[0], d), inside(y, off[1], h), inside(x, off[2], w)) {
                        (Some(zz), Some(yy), Some(xx)) => src[(zz * h + yy) * w + xx],
                        _ => border,
                    }
                };
                let v = if spec.dilate {
                    u8::from(offs.iter().any(|off| read(off) != 0))
                } else {
                    u8::from(offs.iter().all(|off| read(off) != 0))
                };
                changed |= v != inp;
                *o = v;
            }
            changed
        })
        .reduce(|| false, |a, b| a || b);
    (out, changed)
}

/// `spec` with its iterations (`< 1`: until nothing changes) from the 0/1 plane `src`.
pub fn binary_run(src: Vec<u8>, shape: [usize; 3], spec: &BinarySpec, mask: Option<&[u8]>) -> Vec<u8> {
    let mut cur = src;
    let mut i = 0i64;
    loop {
        let (next, changed) = binary_step(&cur, shape, spec, mask);
        cur = next;
        i += 1;
        if (spec.iterations >= 1 && i >= spec.iterations) || (spec.iterations < 1 && !changed) {
            return cur;
        }
    }
}

/// `spec` on a storage of any dtype (non-zero is true), into a `u8` 0/1 storage.
pub fn binary_storage(x: &CpuStorage, shape: [usize; 3], spec: &BinarySpec) -> Result<CpuStorage> {
    let t = truth(x);
    check_shape("binary morphology", shape, t.len())?;
    Ok(CpuStorage::U8(binary_run(t, shape, spec, None).into()))
}

/// scipy's `binary_fill_holes` with the dilation `spec` ([`BinarySpec::fill_holes`]).
pub fn fill_holes_storage(x: &CpuStorage, shape: [usize; 3], spec: &BinarySpec) -> Result<CpuStorage> {
    let t = truth(x);
    check_shape("binary_fill_holes", shape, t.len())?;
    let mask: Vec<u8> = t.par_iter().map(|&v| 1 - v).collect();
    let grown = binary_run(vec![0u8; t.len()], shape, spec, Some(&mask));
    Ok(CpuStorage::U8(
        grown.into_par_iter().map(|v| 1 - v).collect::<Vec<_>>().into(),
    ))
}

/// Coordinate `i + o` when it lies in `0..n` (outside reads the border value).
#[inline]
fn inside(i: usize, o: isize, n: usize) -> Option<usize> {
    let j = i as isize + o;
    (0..n as isize).contains(&j).then_some(j as usize)
}
