//! GEMM vocabulary shared by the backends: the shape of a batched, optionally transposed,
//! row-major matrix product ([`Gemm`]), the storage/compute precisions ([`GemmPrecision`])
//! with their error bounds, and which implementation runs it ([`GemmImpl`]).
//!
//! Conventions (row-major, as numpy's `op(a) @ op(b)`): for each batch index `z`,
//! `C_z (m x n) = op(A_z) (m x k) · op(B_z) (k x n)`. `A` is stored `m x k` (row stride `k`),
//! or `k x m` when `trans_a` (then `op(A) = Aᵀ`); `B` is stored `k x n`, or `n x k` when
//! `trans_b`. Matrices are packed (the row stride is the stored row length); batch `z` of
//! `A` starts at element `z * stride_a` (`stride_a = 0` broadcasts one `A` to every batch),
//! likewise `B`; `C` is always packed, `batch * m * n` elements.
//!
//! [`check_storage`] is the one check both backends make before they touch the data.

use crate::backend::Element;
use crate::{DType, Error, Result};
use std::fmt;
use std::str::FromStr;

/// Storage precision of `A`, `B` and `C`, and what the multiply may round to. Every
/// precision accumulates in f32.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GemmPrecision {
    /// f32 storage, f32 products (SIMT fma on a GPU).
    F32,
    /// f32 storage; a GPU may round `A` and `B` to TF32 (10 explicit mantissa bits) for the
    /// tensor cores. The CPU has no TF32 and computes in f32 (more accurate).
    Tf32,
    /// bfloat16 storage (8-bit significand); products exact in f32, `C` rounded to bf16.
    Bf16,
    /// IEEE half storage (11-bit significand); products exact in f32, `C` rounded to f16.
    F16,
}

impl GemmPrecision {
    /// All four, in the order the CLI and benches list them.
    pub const ALL: [GemmPrecision; 4] = [
        GemmPrecision::F32,
        GemmPrecision::Tf32,
        GemmPrecision::Bf16,
        GemmPrecision::F16,
    ];

    /// The name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            GemmPrecision::F32 => "f32",
            GemmPrecision::Tf32 => "tf32",
            GemmPrecision::Bf16 => "bf16",
            GemmPrecision::F16 => "f16",
        }
    }

    /// The element type of `A`, `B` and `C`.
    pub fn storage(self) -> DType {
        match self {
            GemmPrecision::F32 | GemmPrecision::Tf32 => DType::F32,
            GemmPrecision::Bf16 => DType::BF16,
            GemmPrecision::F16 => DType::F16,
        }
    }

    /// Relative error of rounding each input before it is multiplied: 0 when the inputs are
    /// used as stored (f32, and bf16/f16, whose products are exact in f32); `2^-10` for TF32
    /// (10 explicit mantissa bits; `2^-10` also covers a conversion that truncates).
    pub fn input_roundoff(self) -> f64 {
        match self {
            GemmPrecision::Tf32 => 2f64.powi(-10),
            _ => 0.0,
        }
    }

    /// Unit roundoff of the stored result: f32 `2^-24`, bf16 `2^-8`, f16 `2^-11`.
    pub fn output_roundoff(self) -> f64 {
        match self.storage() {
            DType::BF16 => 2f64.powi(-8),
            DType::F16 => 2f64.powi(-11),
            _ => 2f64.powi(-24),
        }
    }

    /// The factor `β` of the element-wise bound `|C - C_exact| <= β · Σ_p |a_ip|·|b_pj|`,
    /// where `C_exact` is the exact product of the stored inputs:
    /// - each product `a'·b'` of inputs rounded to the compute precision is off by at most
    ///   `(2u_in + u_in²)|a·b|` ([`Self::input_roundoff`]);
    /// - `k` terms summed in f32 in any order are off by at most `γ_k = k·u/(1 - k·u)` of
    ///   the sum of magnitudes (Higham, Accuracy and Stability, §3.1); `u = 2^-23` (twice
    ///   f32's unit roundoff) allows tensor cores that truncate instead of rounding;
    /// - storing `C` adds `u_out·|C| <= u_out·Σ|a||b|` ([`Self::output_roundoff`]).
    pub fn bound_factor(self, k: usize) -> f64 {
        let u_in = self.input_roundoff();
        let ku = k as f64 * 2f64.powi(-23);
        (2.0 * u_in + u_in * u_in) + ku / (1.0 - ku).max(0.5) + self.output_roundoff()
    }
}

/// Checks that `T` is the storage type of `p` (an [`Error::InvalidArgument`] naming both
/// otherwise). Both backends call it before a product.
pub fn check_storage<T: Element>(p: GemmPrecision) -> Result<()> {
    if T::DTYPE != p.storage() {
        return Err(Error::invalid(
            "gemm",
            format!(
                "precision {p} stores {} but the data is {}; pass {} data (or pick the matching precision)",
                p.storage(),
                T::DTYPE,
                p.storage()
            ),
        ));
    }
    Ok(())
}

impl fmt::Display for GemmPrecision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for GemmPrecision {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        GemmPrecision::ALL
            .into_iter()
            .find(|p| p.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| {
                Error::invalid(
                    "gemm",
                    format!("precision `{s}`: expected f32, tf32, bf16 or f16"),
                )
            })
    }
}

/// Which implementation multiplies.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum GemmImpl {
    /// The vendor library: cuBLAS on a GPU, faer on the CPU. Every precision.
    #[default]
    Library,
    /// kiln's tiled f32 SIMT kernel (GPU, f32 only).
    Tiled,
    /// The seed's naive kernel, one thread per element of C (GPU, f32 only): the baseline.
    Naive,
    /// kiln's tensor-core kernel: TMA loads, wgmma, warp-specialised and persistent (GPU of
    /// compute capability 9.0, bf16, one product, `k` a multiple of 8).
    Wgmma,
}

impl GemmImpl {
    /// `library`, `tiled` or `naive`.
    pub fn name(self) -> &'static str {
        match self {
            GemmImpl::Library => "library",
            GemmImpl::Tiled => "tiled",
            GemmImpl::Naive => "naive",
            GemmImpl::Wgmma => "wgmma",
        }
    }
}

/// The shape of one GEMM call (see the module docs for the layout).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Gemm {
    /// Rows of `op(A)` and `C`.
    pub m: usize,
    /// Columns of `op(B)` and `C`.
    pub n: usize,
    /// Columns of `op(A)`, rows of `op(B)`: the summed dimension.
    pub k: usize,
    /// `A` is stored `k x m` and used transposed.
    pub trans_a: bool,
    /// `B` is stored `n x k` and used transposed.
    pub trans_b: bool,
    /// Number of products.
    pub batch: usize,
    /// Elements from one `A` to the next (`m*k` packed; 0 broadcasts one `A`).
    pub stride_a: usize,
    /// Elements from one `B` to the next (`k*n` packed; 0 broadcasts one `B`).
    pub stride_b: usize,
}

impl Gemm {
    /// One `m x k` by `k x n` product, nothing transposed.
    pub fn new(m: usize, n: usize, k: usize) -> Self {
        Gemm {
            m,
            n,
            k,
            trans_a: false,
            trans_b: false,
            batch: 1,
            stride_a: m.saturating_mul(k),
            stride_b: k.saturating_mul(n),
        }
    }

    /// With `op(A) = Aᵀ` (`A` stored `k x m`) and/or `op(B) = Bᵀ` (`B` stored `n x k`).
    pub fn transposed(mut self, a: bool, b: bool) -> Self {
        self.trans_a = a;
        self.trans_b = b;
        self
    }

    /// `batch` packed products (strides `m*k` and `k*n`).
    pub fn batched(mut self, batch: usize) -> Self {
        self.batch = batch;
        self.stride_a = self.m.saturating_mul(self.k);
        self.stride_b = self.k.saturating_mul(self.n);
        self
    }

    /// Explicit batch strides in elements (0 broadcasts).
    pub fn with_strides(mut self, stride_a: usize, stride_b: usize) -> Self {
        self.stride_a = stride_a;
        self.stride_b = stride_b;
        self
    }

    /// Row stride of `A` as stored: `k`, or `m` when transposed.
    pub fn lda(&self) -> usize {
        if self.trans_a {
            self.m
        } else {
            self.k
        }
    }

    /// Row stride of `B` as stored: `n`, or `k` when transposed.
    pub fn ldb(&self) -> usize {
        if self.trans_b {
            self.k
        } else {
            self.n
        }
    }

    /// Element `(i, p)` of `op(A_z)`'s index into `A`.
    pub fn a_index(&self, z: usize, i: usize, p: usize) -> usize {
        z * self.stride_a
            + if self.trans_a {
                p * self.m + i
            } else {
                i * self.k + p
            }
    }

    /// Element `(p, j)` of `op(B_z)`'s index into `B`.
    pub fn b_index(&self, z: usize, p: usize, j: usize) -> usize {
        z * self.stride_b
            + if self.trans_b {
                j * self.k + p
            } else {
                p * self.n + j
            }
    }

    /// Multiply-adds times two: the FLOP count rates are quoted in.
    pub fn flops(&self) -> f64 {
        2.0 * self.m as f64 * self.n as f64 * self.k as f64 * self.batch as f64
    }

    /// Elements `A` must hold: `(batch-1)*stride_a + m*k` (checked for overflow).
    pub fn len_a(&self) -> Result<usize> {
        extent(self.batch, self.stride_a, self.m, self.k, "A")
    }

    /// Elements `B` must hold: `(batch-1)*stride_b + k*n`.
    pub fn len_b(&self) -> Result<usize> {
        extent(self.batch, self.stride_b, self.k, self.n, "B")
    }

    /// Elements of `C`: `batch*m*n`.
    pub fn len_c(&self) -> Result<usize> {
        self.m
            .checked_mul(self.n)
            .and_then(|mn| mn.checked_mul(self.batch))
            .ok_or_else(|| Error::invalid("gemm", format!("{self} overflows the address space")))
    }

    /// Checks every dimension is positive and the inputs hold exactly `len_a()` and
    /// `len_b()` elements; returns `len_c()`.
    pub fn validate(&self, len_a: usize, len_b: usize) -> Result<usize> {
        for (what, v) in [("m", self.m), ("n", self.n), ("k", self.k), ("batch", self.batch)] {
            if v == 0 {
                return Err(Error::invalid(
                    "gemm",
                    format!("{what} = 0 in {self}: every dimension and the batch must be at least 1"),
                ));
            }
        }
        for (what, want, got) in [("A", self.len_a()?, len_a), ("B", self.len_b()?, len_b)] {
            if want != got {
                return Err(Error::ShapeMismatch {
                    op: format!("gemm {self}: elements of {what}"),
                    expected: vec![want],
                    got: vec![got],
                });
            }
        }
        self.len_c()
    }
}

fn extent(batch: usize, stride: usize, rows: usize, cols: usize, what: &str) -> Result<usize> {
    batch
        .saturating_sub(1)
        .checked_mul(stride)
        .and_then(|s| rows.checked_mul(cols).and_then(|rc| s.checked_add(rc)))
        .ok_or_else(|| Error::invalid("gemm", format!("{what}'s extent overflows the address space")))
}

impl fmt::Display for Gemm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x{}x{}", self.m, self.n, self.k)?;
        if self.trans_a || self.trans_b {
            let t = |b: bool| if b { 'T' } else { 'N' };
            write!(f, " {}{}", t(self.trans_a), t(self.trans_b))?;
        }
        if self.batch > 1 {
            write!(f, " batch {}", self.batch)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_strides_and_errors() {
        let g = Gemm::new(3, 4, 5).batched(2);
        assert_eq!(
            (g.len_a().ok(), g.len_b().ok(), g.len_c().ok()),
            (Some(30), Some(40), Some(24))
        );
        assert_eq!(g.validate(30, 40).ok(), Some(24));
        assert!(matches!(g.validate(29, 40), Err(Error::ShapeMismatch { .. })));
        assert!(g.validate(30, 41).is_err());
        let bc = g.with_strides(0, 20);
        assert_eq!((bc.len_a().ok(), bc.len_b().ok()), (Some(15), Some(40)));
        for bad in [
            Gemm::new(0, 4, 5),
            Gemm::new(3, 0, 5),
            Gemm::new(3, 4, 0),
            g.batched(0),
        ] {
            assert!(
                matches!(bad.validate(0, 0), Err(Error::InvalidArgument { .. })),
                "{bad:?}"
            );
        }
        assert!(Gemm::new(usize::MAX, 2, 2).validate(1, 4).is_err());
        let t = Gemm::new(3, 4, 5).transposed(true, true);
        assert_eq!((t.lda(), t.ldb()), (3, 5));
        assert_eq!(t.a_index(0, 2, 1), 5);
        assert_eq!(t.b_index(0, 1, 3), 16);
        assert_eq!(t.to_string(), "3x4x5 TT");
    }

    #[test]
    fn precisions_parse_and_order_their_bounds() {
        for p in GemmPrecision::ALL {
            assert_eq!(p.name().parse::<GemmPrecision>().ok(), Some(p));
        }
        assert!("fp8".parse::<GemmPrecision>().is_err());
        let k = 1024;
        let b = |p: GemmPrecision| p.bound_factor(k);
        assert!(b(GemmPrecision::F32) < b(GemmPrecision::Tf32));
        assert!(b(GemmPrecision::F16) < b(GemmPrecision::Bf16));
        assert!((b(GemmPrecision::F32) - (1024.0 * 2f64.powi(-23) + 2f64.powi(-24))).abs() < 1e-7);
    }

    #[test]
    fn storage_must_match_the_precision() {
        use crate::backend::{bf16, f16};
        assert!(check_storage::<f32>(GemmPrecision::F32).is_ok());
        assert!(check_storage::<f32>(GemmPrecision::Tf32).is_ok());
        assert!(check_storage::<bf16>(GemmPrecision::Bf16).is_ok());
        assert!(check_storage::<f16>(GemmPrecision::F16).is_ok());
        let err = check_storage::<f32>(GemmPrecision::Bf16).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
        let msg = err.to_string();
        assert!(msg.contains("bf16") && msg.contains("f32"), "{msg}");
        assert!(check_storage::<bf16>(GemmPrecision::F16).is_err());
    }
}
