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

/// One step of `spec` on the plane `src` (non-zero is true) of shape `(d, h, w)`: the 0/1
/// output and whether any pixel changed. Where `mask` is given and 0 the pixel keeps its
/// input.
///
/// Row by row: each offset of the structure contributes its whole source row (or the border
/// value where the row is outside) shifted along x, combined into the output row with AND
/// (erosion) or OR (dilation) in straight loops the compiler vectorises, rather than a
/// bounds test per pixel and offset. The result is the same: each pixel is the AND (OR) of
/// its window's truths, the border value outside.
pub fn binary_step(src: &[u8], shape: [usize; 3], spec: &BinarySpec, mask: Option<&[u8]>) -> (Vec<u8>, bool) {
    let [d, h, w] = shape;
    let offs = spec.offsets();
    let border = u8::from(spec.border_value);
    let dilate = spec.dilate;
    // AND (OR) of a 0/1 accumulator with a truth
    let join = |acc: &mut u8, v: u8| {
        if dilate {
            *acc |= v;
        } else {
            *acc &= v;
        }
    };
    let mut out = vec![0u8; src.len()];
    let changed = out
        .par_chunks_mut(w)
        .enumerate()
        .map(|(row, orow)| {
            let (z, y) = (row / h, row % h);
            orow.fill(u8::from(!dilate));
            for off in &offs {
                let line = match (inside(z, off[0], d), inside(y, off[1], h)) {
                    (Some(zz), Some(yy)) => &src[(zz * h + yy) * w..][..w],
                    _ => {
                        orow.iter_mut().for_each(|o| join(o, border));
                        continue;
                    }
                };
                // x + dx is inside the row for x in lo..hi; the border elsewhere
                let dx = off[2];
                let lo = (-dx).clamp(0, w as isize) as usize;
                let hi = (w as isize - dx).clamp(lo as isize, w as isize) as usize;
                orow[..lo].iter_mut().for_each(|o| join(o, border));
                orow[hi..].iter_mut().for_each(|o| join(o, border));
                if hi > lo {
                    let from = (lo as isize + dx) as usize;
                    for (o, &v) in orow[lo..hi].iter_mut().zip(&line[from..from + (hi - lo)]) {
                        join(o, u8::from(v != 0));
                    }
                }
            }
            let inp = &src[row * w..][..w];
            if let Some(m) = mask {
                for ((o, &i), &k) in orow.iter_mut().zip(inp).zip(&m[row * w..][..w]) {
                    if k == 0 {
                        *o = i;
                    }
                }
            }
            orow.iter().zip(inp).any(|(&o, &i)| o != i)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The definition: each pixel the AND (OR) of its window's truths, the border outside.
    fn reference(src: &[u8], shape: [usize; 3], spec: &BinarySpec, mask: Option<&[u8]>) -> Vec<u8> {
        let [d, h, w] = shape;
        let offs = spec.offsets();
        let border = u8::from(spec.border_value);
        (0..src.len())
            .map(|p| {
                if mask.is_some_and(|m| m[p] == 0) {
                    return src[p];
                }
                let (z, y, x) = (p / (h * w), (p / w) % h, p % w);
                let read = |o: &[isize; 3]| match (inside(z, o[0], d), inside(y, o[1], h), inside(x, o[2], w))
                {
                    (Some(zz), Some(yy), Some(xx)) => u8::from(src[(zz * h + yy) * w + xx] != 0),
                    _ => border,
                };
                if spec.dilate {
                    u8::from(offs.iter().any(|o| read(o) != 0))
                } else {
                    u8::from(offs.iter().all(|o| read(o) != 0))
                }
            })
            .collect()
    }

    #[test]
    fn rows_combined_whole_match_the_window_definition() {
        let mut s = 0x2545_f491_4f6c_dd1du64;
        let mut next = move |n: u64| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s % n
        };
        for shape in [
            [1, 1, 1],
            [1, 1, 9],
            [1, 7, 5],
            [1, 13, 70],
            [3, 5, 8],
            [4, 1, 33],
        ] {
            for trial in 0..24 {
                let n = shape.iter().product::<usize>();
                // values other than 0 and 1 are true too
                let src: Vec<u8> = (0..n).map(|_| [0, 1, 0, 7][next(4) as usize]).collect();
                let fshape = [
                    if shape[0] > 1 { 3 } else { 1 },
                    if shape[1] > 1 { 1 + 2 * next(2) as usize } else { 1 },
                    1 + 2 * next(3) as usize,
                ];
                let fmask: Vec<bool> = (0..fshape.iter().product::<usize>())
                    .map(|_| next(3) != 0)
                    .collect();
                // origins up to the structure's half width, and past the row (whole-border rows)
                let ox = if trial % 6 == 5 { 40 } else { next(3) as isize - 1 };
                let spec = BinarySpec {
                    fshape,
                    mask: fmask,
                    origin: [0, 0, ox.clamp(-(fshape[2] as isize / 2) - 40, 40)],
                    border_value: next(2) == 1,
                    dilate: trial % 2 == 1,
                    iterations: 1,
                };
                let mask: Option<Vec<u8>> = (trial % 3 == 0).then(|| (0..n).map(|_| next(2) as u8).collect());
                let want = reference(&src, shape, &spec, mask.as_deref());
                let (got, changed) = binary_step(&src, shape, &spec, mask.as_deref());
                assert_eq!(got, want, "shape {shape:?} trial {trial} spec {spec:?}");
                assert_eq!(changed, got.iter().zip(&src).any(|(a, b)| a != b));
            }
        }
    }
}
