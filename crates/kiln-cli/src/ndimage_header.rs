//! The NIfTI header after `shift`, `rotate` and `affine_transform`: the voxel-to-world
//! transforms follow the resampling so every output voxel keeps the world position of the
//! input point it was sampled from.
//!
//! Output voxel `o` reads the input at `m · o + t` (the function's index map, first three
//! axes; a 4-D series shares it). With the input's affine `A` (a 3x4 `[L | c]`), the output's
//! is `A · [m | t]`: linear part `L · m`, translation `L · t + c`.
//! - the sform (`sform_code > 0`) takes that affine as it is;
//! - the qform (`qform_code > 0`) holds a rotation, voxel sizes and an offset, so it can
//!   follow only while `L · m` still has orthogonal columns (a shift; a rotation in a plane
//!   of equal voxel sizes): its columns' lengths become the voxel sizes (`pixdim[1..=3]`), the
//!   rest the quaternion (NIfTI-1's `mat44_to_quatern`) and `qfac`. Otherwise (a rotation
//!   with unequal voxel sizes, a shear, a scaling of a rotated grid) no qform describes the
//!   grid: `qform_code` is set to 0 and the summary says so;
//! - with neither code set the header has no world transform to move (the summary says so).
//!
//! `pixdim[1..=3]` become the new voxel sizes: the qform's where it follows, else the lengths
//! of the sform's columns.

use kiln_io::NiftiHeader;

/// What happened to the header, for the `--json` summary.
pub(crate) const MOVED: &str = "moved";
pub(crate) const QFORM_DROPPED: &str =
    "moved; qform_code set to 0 (the map is not rigid in world space, no qform holds it)";
pub(crate) const NO_TRANSFORM: &str = "kept (qform_code and sform_code are 0: no world transform)";

/// A 3-D index map: input coordinate = `m · o + t`.
pub(crate) struct IndexMap {
    pub m: [[f64; 3]; 3],
    pub t: [f64; 3],
}

impl IndexMap {
    /// The identity with `t` as offset.
    pub(crate) fn shift(t: [f64; 3]) -> Self {
        IndexMap {
            m: [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]],
            t,
        }
    }
}

/// `l · m` and `l · t + c` for the 3x4 affine `[l | c]`.
fn compose(a: &[[f64; 4]; 4], map: &IndexMap) -> ([[f64; 3]; 3], [f64; 3]) {
    let mut lin = [[0.0; 3]; 3];
    let mut off = [0.0; 3];
    for r in 0..3 {
        for (c, v) in lin[r].iter_mut().enumerate() {
            *v = (0..3).map(|k| a[r][k] * map.m[k][c]).sum();
        }
        off[r] = a[r][3] + (0..3).map(|k| a[r][k] * map.t[k]).sum::<f64>();
    }
    (lin, off)
}

/// NIfTI-1's `mat44_to_quatern` for a proper rotation `r`: `(b, c, d)` with `a >= 0`.
fn quaternion(r: &[[f64; 3]; 3]) -> [f64; 3] {
    let a = r[0][0] + r[1][1] + r[2][2] + 1.0;
    let (a, b, c, d) = if a > 0.5 {
        let a = 0.5 * a.sqrt();
        (
            a,
            0.25 * (r[2][1] - r[1][2]) / a,
            0.25 * (r[0][2] - r[2][0]) / a,
            0.25 * (r[1][0] - r[0][1]) / a,
        )
    } else {
        let xd = 1.0 + r[0][0] - (r[1][1] + r[2][2]);
        let yd = 1.0 + r[1][1] - (r[0][0] + r[2][2]);
        let zd = 1.0 + r[2][2] - (r[0][0] + r[1][1]);
        if xd > 1.0 {
            let b = 0.5 * xd.sqrt();
            (
                0.25 * (r[2][1] - r[1][2]) / b,
                b,
                0.25 * (r[0][1] + r[1][0]) / b,
                0.25 * (r[0][2] + r[2][0]) / b,
            )
        } else if yd > 1.0 {
            let c = 0.5 * yd.sqrt();
            (
                0.25 * (r[0][2] - r[2][0]) / c,
                0.25 * (r[0][1] + r[1][0]) / c,
                c,
                0.25 * (r[1][2] + r[2][1]) / c,
            )
        } else {
            let d = 0.5 * zd.sqrt();
            (
                0.25 * (r[1][0] - r[0][1]) / d,
                0.25 * (r[0][2] + r[2][0]) / d,
                0.25 * (r[1][2] + r[2][1]) / d,
                d,
            )
        }
    };
    if a < 0.0 {
        [-b, -c, -d]
    } else {
        [b, c, d]
    }
}

fn det(m: &[[f64; 3]; 3]) -> f64 {
    m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1]) - m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0])
        + m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0])
}

/// Moves `h`'s transforms with `map` (module docs); returns what happened.
pub(crate) fn follow(h: &mut NiftiHeader, map: &IndexMap) -> &'static str {
    if h.sform_code <= 0 && h.qform_code <= 0 {
        return NO_TRANSFORM;
    }
    let mut note = MOVED;
    // the voxel sizes under the sform, which pixdim takes where no qform sets them
    let mut sizes = None;
    if h.sform_code > 0 {
        let a = kiln_io::header_affine(h);
        let (lin, off) = compose(&a, map);
        for (r, row) in [&mut h.srow_x, &mut h.srow_y, &mut h.srow_z]
            .into_iter()
            .enumerate()
        {
            for c in 0..3 {
                row[c] = lin[r][c] as f32;
            }
            row[3] = off[r] as f32;
        }
        sizes = Some([0, 1, 2].map(|c| (0..3).map(|r| lin[r][c] * lin[r][c]).sum::<f64>().sqrt()));
    }
    if h.qform_code > 0 {
        let q = kiln_io::header_affine(&NiftiHeader {
            sform_code: 0,
            ..h.clone()
        });
        let (lin, off) = compose(&q, map);
        let col = |c: usize| [lin[0][c], lin[1][c], lin[2][c]];
        let dot = |a: [f64; 3], b: [f64; 3]| a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
        let norms: Vec<f64> = (0..3).map(|c| dot(col(c), col(c)).sqrt()).collect();
        let orthogonal = norms.iter().all(|&n| n > 0.0)
            && [(0, 1), (0, 2), (1, 2)]
                .iter()
                .all(|&(i, j)| dot(col(i), col(j)).abs() <= 1e-6 * norms[i] * norms[j]);
        if orthogonal {
            let mut r = [[0.0; 3]; 3];
            for (i, row) in r.iter_mut().enumerate() {
                for (j, v) in row.iter_mut().enumerate() {
                    *v = lin[i][j] / norms[j];
                }
            }
            let qfac = if det(&r) < 0.0 {
                for row in &mut r {
                    row[2] = -row[2];
                }
                -1.0
            } else {
                1.0
            };
            let [b, c, d] = quaternion(&r);
            h.quatern_b = b as f32;
            h.quatern_c = c as f32;
            h.quatern_d = d as f32;
            h.quatern_x = off[0] as f32;
            h.quatern_y = off[1] as f32;
            h.quatern_z = off[2] as f32;
            h.pixdim[0] = qfac;
            sizes = Some([norms[0], norms[1], norms[2]]);
        } else {
            h.qform_code = 0;
            note = QFORM_DROPPED;
        }
    }
    if let Some(sizes) = sizes {
        for (p, n) in h.pixdim[1..4].iter_mut().zip(sizes) {
            *p = n as f32;
        }
    }
    note
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quaternion_round_trips_through_the_headers_rotation() {
        for (b, c, d) in [
            (0.1, -0.2, 0.3),
            (0.7, 0.1, -0.1),
            (0.0, 0.0, 0.999),
            (-0.5, 0.5, 0.5),
        ] {
            let h = NiftiHeader {
                qform_code: 1,
                sform_code: 0,
                pixdim: [1.0; 8],
                quatern_b: b,
                quatern_c: c,
                quatern_d: d,
                ..NiftiHeader::default()
            };
            let a = kiln_io::header_affine(&h);
            let r = [
                [a[0][0], a[0][1], a[0][2]],
                [a[1][0], a[1][1], a[1][2]],
                [a[2][0], a[2][1], a[2][2]],
            ];
            let q = quaternion(&r);
            // the same rotation: (b, c, d) up to the sign fixed by a >= 0
            for (got, want) in q.iter().zip([b, c, d]) {
                assert!((got - f64::from(want)).abs() < 1e-6, "{q:?} vs {:?}", (b, c, d));
            }
        }
    }
}
