//! Quasi-Monte Carlo paths: randomised Sobol points ([`super::sobol`]), the inverse normal
//! CDF ([`super::invnorm`]) and a Brownian bridge that gives the first (best distributed)
//! dimensions of a point to the path's largest-variance moves: the terminal value first,
//! then the midpoints, then the quarter points, and so on.
//!
//! # The contract (both engines; `finance_qmc.cu` on the GPU)
//!
//! A run with `R` replicates of `M` points ([`McParams::points_per_replicate`]) numbers its
//! samples `s = r M + i`: replicate `r = s / M`, point `i = s % M`. For a path of `n` steps
//! (Asian: fixings), with `W[0] = 0` and bridge nodes `j = 0..n` from [`BrownianBridge`]:
//!
//! ```text
//! z_j   = inv_norm_f32(uniform_f64(sobol_u32(v, i, j) ^ shift[r n + j]))     (f32)
//! W[t_j] = fma(c_j, z_j, fma(a_j, W[l_j], b_j * W[r_j]))                    (f32, in node order)
//! dz_k  = W[k + 1] - W[k],  k = 0..n                                       (f32)
//! ```
//!
//! and `dz_k` takes the place of normal `k` of a Philox path in [`super::PathParams`]'
//! recurrence (`x += fma(vol_sqrt_dt, dz_k, drift_dt)`, antithetic mirror with `-dz_k`), so
//! every payoff, control and Greek is computed as for Philox paths. The bridge is in units of
//! one step (`W[k]` has variance `k`), so the increments are standard normals.
//!
//! [`McParams::points_per_replicate`]: super::McParams::points_per_replicate

#![allow(clippy::needless_range_loop)] // the bridge's arrays are indexed together

use super::invnorm::inv_norm_f32;
use super::sobol::{digital_shifts, direction_numbers_for, sobol_u32, SOBOL_MAX_DIMS};
use super::{McParams, PathParams, Rng};
use crate::error::{Error, Result};
use crate::philox::uniform_f64;

/// The most steps (Asian: fixings) of a Sobol path: the GPU kernel keeps the bridge's
/// `steps + 1` values in a per-thread array of this size.
pub const QMC_MAX_STEPS: u32 = 1024;

/// Whether a path of `steps` steps (Asian: fixings) can use Sobol points (at most
/// [`QMC_MAX_STEPS`]); the error says what to do otherwise.
pub fn check_steps(steps: u32) -> Result<()> {
    if steps > QMC_MAX_STEPS || steps as usize > SOBOL_MAX_DIMS {
        return Err(Error::invalid(
            "qmc",
            format!("{steps} steps (or fixings); the sobol generator takes at most {QMC_MAX_STEPS} (use --rng philox)"),
        ));
    }
    Ok(())
}

/// A Brownian bridge over `n` unit steps: node `j` sets `W[target[j]]` from `W[left[j]]`,
/// `W[right[j]]` and normal `j` (see the module docs). QuantLib's construction (`BrownianBridge`,
/// equal steps): the terminal point, then the middle of the largest gap, left to right.
#[derive(Clone, Debug, PartialEq)]
pub struct BrownianBridge {
    /// The index into `W` (1..=n) each node sets.
    pub target: Vec<u32>,
    /// The left neighbour's index (0: `W[0] = 0`).
    pub left: Vec<u32>,
    /// The right neighbour's index (0 for the first node, which has none).
    pub right: Vec<u32>,
    /// Weight of the left neighbour.
    pub a: Vec<f32>,
    /// Weight of the right neighbour.
    pub b: Vec<f32>,
    /// Standard deviation of the node given its neighbours.
    pub c: Vec<f32>,
}

impl BrownianBridge {
    /// The bridge of `n >= 1` unit steps (weights computed in f64, rounded once).
    pub fn new(n: u32) -> Self {
        let n = n.max(1) as usize;
        let mut br = BrownianBridge {
            target: vec![n as u32],
            left: vec![0],
            right: vec![0],
            a: vec![0.0],
            b: vec![0.0],
            c: vec![(n as f64).sqrt() as f32],
        };
        // map[p] != 0 once path point p (time p + 1) is set.
        let mut map = vec![false; n];
        map[n - 1] = true;
        let mut j = 0usize;
        for _ in 1..n {
            while map[j] {
                j += 1;
            }
            let mut k = j;
            while !map[k] {
                k += 1;
            }
            // points j..k-1 are free, k is set; l is the middle of the gap
            let l = j + ((k - 1 - j) >> 1);
            map[l] = true;
            // times: left neighbour j (point j - 1, or 0), node l + 1, right k + 1
            let (tl, tm, tr) = (j as f64, (l + 1) as f64, (k + 1) as f64);
            br.target.push((l + 1) as u32);
            br.left.push(j as u32);
            br.right.push((k + 1) as u32);
            br.a.push(((tr - tm) / (tr - tl)) as f32);
            br.b.push(((tm - tl) / (tr - tl)) as f32);
            br.c.push(((tm - tl) * (tr - tm) / (tr - tl)).sqrt() as f32);
            j = k + 1;
            if j >= n {
                j = 0;
            }
        }
        br
    }

    /// Steps.
    pub fn len(&self) -> usize {
        self.target.len()
    }

    /// Never empty (at least one step).
    pub fn is_empty(&self) -> bool {
        self.target.is_empty()
    }

    /// Builds `w[0..=n]` (`w[0] = 0`) from the normals `z[0..n]` in node order.
    #[inline]
    pub fn build(&self, z: &[f32], w: &mut [f32]) {
        w[0] = 0.0;
        for j in 0..self.len() {
            let (t, l, r) = (
                self.target[j] as usize,
                self.left[j] as usize,
                self.right[j] as usize,
            );
            let mid = self.a[j].mul_add(w[l], self.b[j] * w[r]);
            w[t] = self.c[j].mul_add(z[j], mid);
        }
    }
}

/// Everything a run needs to map a sample index to its path increments.
#[derive(Clone, Debug)]
pub struct QmcPlan {
    /// Dimensions (= steps, or fixings).
    pub dims: usize,
    /// Points per replicate, `M`.
    pub points: u64,
    /// Replicates, `R`.
    pub replicates: u32,
    /// Direction numbers of dimensions `0..dims` (`v[d * 32 + k]`).
    pub directions: &'static [u32],
    /// Digital shifts, `shift[r * dims + d]`.
    pub shifts: Vec<u32>,
    /// The bridge over `dims` steps.
    pub bridge: BrownianBridge,
}

impl QmcPlan {
    /// The plan of a Sobol run (`mc.rng` must be [`Rng::Sobol`]) for the path `pp`.
    pub fn new(pp: &PathParams, mc: &McParams) -> Result<Self> {
        let Rng::Sobol { replicates } = mc.rng else {
            return Err(Error::invalid("qmc", "the run does not use the sobol generator"));
        };
        check_steps(pp.steps)?;
        let dims = pp.steps as usize;
        Ok(QmcPlan {
            dims,
            points: mc.points_per_replicate(),
            replicates,
            directions: direction_numbers_for(dims),
            shifts: digital_shifts(pp.key, replicates, dims),
            bridge: BrownianBridge::new(pp.steps),
        })
    }

    /// The standard normal increments `dz[0..dims]` of sample `s` (see the module docs);
    /// `z` (`dims`) and `w` (`dims + 1`) are scratch.
    #[inline]
    pub fn increments(&self, s: u64, z: &mut [f32], w: &mut [f32], dz: &mut [f32]) {
        let r = (s / self.points) as usize;
        // Points per replicate are <= 2^32 (McParams::validate).
        let i = (s % self.points) as u32;
        let shifts = &self.shifts[r * self.dims..(r + 1) * self.dims];
        for (d, zd) in z.iter_mut().enumerate().take(self.dims) {
            let x = sobol_u32(self.directions, i, d) ^ shifts[d];
            *zd = inv_norm_f32(uniform_f64(x));
        }
        self.bridge.build(z, w);
        for k in 0..self.dims {
            dz[k] = w[k + 1] - w[k];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bridge_of_eight_steps_starts_at_the_end_then_halves() {
        let b = BrownianBridge::new(8);
        assert_eq!(b.target, vec![8, 4, 2, 6, 1, 3, 5, 7]);
        assert_eq!(b.left[..4], [0, 0, 0, 4]);
        assert_eq!(b.right[..4], [0, 8, 4, 8]);
        assert_eq!((b.a[1], b.b[1], b.c[1]), (0.5, 0.5, 2f32.sqrt()));
        assert_eq!(b.c[0], 8f32.sqrt());
    }

    /// Every node is set once, after its neighbours, and the increments of the bridge have
    /// the covariance of independent unit steps (checked exactly through the linear map).
    #[test]
    fn bridge_increments_are_independent_unit_normals() {
        for n in [1u32, 2, 3, 5, 7, 12, 64, 100] {
            let b = BrownianBridge::new(n);
            let n = n as usize;
            let mut set = vec![false; n + 1];
            set[0] = true;
            for j in 0..n {
                assert!(set[b.left[j] as usize] && (j == 0 || set[b.right[j] as usize]));
                assert!(!set[b.target[j] as usize]);
                set[b.target[j] as usize] = true;
            }
            // dz = L z for a matrix L; columns of L from unit vectors; L L^T must be ~ I.
            let mut cols = vec![vec![0f64; n]; n];
            let mut w = vec![0f32; n + 1];
            for (j, col) in cols.iter_mut().enumerate() {
                let mut z = vec![0f32; n];
                z[j] = 1.0;
                b.build(&z, &mut w);
                for k in 0..n {
                    col[k] = f64::from(w[k + 1] - w[k]);
                }
            }
            for p in 0..n {
                for q in 0..n {
                    let cov: f64 = (0..n).map(|j| cols[j][p] * cols[j][q]).sum();
                    let want = if p == q { 1.0 } else { 0.0 };
                    assert!((cov - want).abs() < 1e-5, "n {n}: cov[{p}][{q}] = {cov}");
                }
            }
        }
    }
}
