//! kiln's own bf16 tensor-core GEMM for Hopper (`kernels/gemm_wgmma.cuh` and `.cu`): TMA tile loads,
//! wgmma from shared memory, a producer warpgroup and two consumer warpgroups over a ring of
//! mbarrier-guarded stages, and a persistent grid of one block per SM.
//!
//! Written by hand because no crate offers a Hopper GEMM kiln can compile with NVRTC and
//! launch on its own streams and pool (CUTLASS is C++ templates for nvcc; cuBLAS is the
//! library path kiln already has). It runs on compute capability 9.0 only: wgmma and
//! `setmaxnreg` are `sm_90a` features, absent from later architectures' instruction sets, so
//! the module is compiled for `sm_90a` ([`WGMMA_ARCH`]) and is not in the kernel table every
//! architecture compiles.
//!
//! One kernel per transpose pair reads each operand as stored (wgmma takes bf16 K-major or
//! M/N-major from shared memory), so no layout costs a copy. The tensor maps (made here by
//! `cuTensorMapEncodeTiled`) read outside the matrices as zeros, so no dimension needs
//! padding; TMA's own rules need each stored row to be a multiple of 16 bytes (its length a
//! multiple of 8) and 16-byte aligned operands, checked before the launch
//! ([`wgmma_unfit`]).
//!
//! Variants ([`WgmmaVariant`]): `sync` waits for each wgmma group and stores C straight from
//! the accumulators; the others keep a group in flight, or store C through shared memory
//! with TMA (so the consumers go back to the next tile's wgmma at once), or walk the tiles
//! in larger groups, or run in clusters of two blocks sharing B's loads (TMA multicast).
//! The default, `tma_halves_g16` (TMA stores in two passes, tiles in groups of 16 rows),
//! and `sync`, its fallback where TMA cannot store C, are in the default module
//! (`kernels/gemm_wgmma.cu`); the others in `kernels/gemm_wgmma_variants.cu`, so the first
//! use of the default does not compile them. `GemmImpl::Wgmma` runs the one named by the
//! environment variable `KILN_WGMMA_VARIANT` (read at each launch: `sync`, `inflight`,
//! `tma_store`, `tma_halves`, `tma_halves_g16`, `cluster`, `cluster_tma_store`,
//! `cluster_tma_halves`; unset or empty: the default; any other value is an error), so one
//! benchmark process can compare them; [`crate::ops::WgmmaMatMul`] names one.
#![allow(unsafe_code)]

use crate::kernels::{Module, Program, GEMM_WGMMA, GEMM_WGMMA_VARIANTS};
use crate::op::Op;
use crate::pool::DeviceBuffer;
use crate::CudaBackend;
use cudarc::driver::sys;
use cudarc::driver::{DeviceRepr, LaunchConfig, PushKernelArg};
use kiln_core::backend::bf16;
use kiln_core::{Error, Result};

/// The architecture the module is compiled for.
pub const WGMMA_ARCH: &str = "sm_90a";
/// The kernels' symbols: `A`, `B` as stored (`nn`), `B` transposed (`nt`), `A` transposed
/// (`tn`), both (`tt`).
pub const WGMMA_SYMBOLS: [&str; 4] = [
    "gemm_wgmma_bf16_nn",
    "gemm_wgmma_bf16_nt",
    "gemm_wgmma_bf16_tn",
    "gemm_wgmma_bf16_tt",
];

/// The environment variable naming the [`WgmmaVariant`] `GemmImpl::Wgmma` runs.
pub const WGMMA_VARIANT_ENV: &str = "KILN_WGMMA_VARIANT";

/// A variant of kiln's bf16 wgmma GEMM: how a consumer warpgroup paces its wgmma groups, how
/// C leaves the block, the ring's depth and the tile order. Each exists for the four
/// transpose pairs and gives the same results (f32 accumulation in the same order, one
/// rounding to bf16); they differ in speed only.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WgmmaVariant {
    /// 4 stages, each wgmma group waited for before the next stage, each consumer thread
    /// storing its accumulator pairs straight to global memory (the default's fallback
    /// where TMA cannot store C).
    Sync,
    /// [`Sync`](Self::Sync) with one group in flight while the next stage is awaited.
    InFlight,
    /// 3 stages; each consumer writes its 64 x 256 bf16 block to a 32 KiB shared buffer and
    /// one thread stores it with TMA, not waiting for the writes (the buffer is reused once
    /// the stores have read it).
    TmaStore,
    /// 4 stages; the TMA-store epilogue in two passes of 128 columns through a 16 KiB buffer
    /// a consumer (the second pass waits for the first's stores to read the buffer).
    TmaHalves,
    /// [`TmaHalves`](Self::TmaHalves) walking the tiles in groups of 16 tile rows, not 8
    /// ([`DEFAULT`](Self::DEFAULT)).
    TmaHalvesG16,
    /// [`Sync`](Self::Sync) in clusters of two blocks on vertically adjacent tiles: each
    /// loads half of the B panel both need and multicasts it into both, halving B's reads
    /// from L2.
    Cluster,
    /// [`Cluster`](Self::Cluster) with [`TmaStore`](Self::TmaStore)'s 3 stages and epilogue.
    ClusterTmaStore,
    /// [`Cluster`](Self::Cluster) with [`TmaHalves`](Self::TmaHalves)'s 4 stages and
    /// epilogue.
    ClusterTmaHalves,
}

impl WgmmaVariant {
    /// What `GemmImpl::Wgmma` runs when [`WGMMA_VARIANT_ENV`] is unset: even with cuBLAS at
    /// 8192³ on an H100 and 6-7% faster than [`Sync`](Self::Sync) (docs/performance.md).
    pub const DEFAULT: WgmmaVariant = WgmmaVariant::TmaHalvesG16;

    /// Every variant, `sync` first.
    pub const ALL: [WgmmaVariant; 8] = [
        WgmmaVariant::Sync,
        WgmmaVariant::InFlight,
        WgmmaVariant::TmaStore,
        WgmmaVariant::TmaHalves,
        WgmmaVariant::TmaHalvesG16,
        WgmmaVariant::Cluster,
        WgmmaVariant::ClusterTmaStore,
        WgmmaVariant::ClusterTmaHalves,
    ];

    /// The name [`WGMMA_VARIANT_ENV`] takes, also the kernels' symbol infix.
    pub fn name(self) -> &'static str {
        match self {
            WgmmaVariant::Sync => "sync",
            WgmmaVariant::InFlight => "inflight",
            WgmmaVariant::TmaStore => "tma_store",
            WgmmaVariant::TmaHalves => "tma_halves",
            WgmmaVariant::TmaHalvesG16 => "tma_halves_g16",
            WgmmaVariant::Cluster => "cluster",
            WgmmaVariant::ClusterTmaStore => "cluster_tma_store",
            WgmmaVariant::ClusterTmaHalves => "cluster_tma_halves",
        }
    }

    /// The variant named `s` (one of the [`name`](Self::name)s).
    pub fn parse(s: &str) -> Result<WgmmaVariant> {
        Self::ALL.into_iter().find(|v| v.name() == s).ok_or_else(|| {
            let names: Vec<&str> = Self::ALL.iter().map(|v| v.name()).collect();
            Error::invalid(
                "gemm",
                format!(
                    "{WGMMA_VARIANT_ENV} = {s:?} names no wgmma variant (one of {})",
                    names.join(", ")
                ),
            )
        })
    }

    /// The variant [`WGMMA_VARIANT_ENV`] names, [`DEFAULT`](Self::DEFAULT) when it is unset
    /// or empty.
    pub fn from_env() -> Result<WgmmaVariant> {
        match std::env::var(WGMMA_VARIANT_ENV) {
            Ok(s) if !s.is_empty() => Self::parse(&s),
            Ok(_) | Err(std::env::VarError::NotPresent) => Ok(Self::DEFAULT),
            Err(std::env::VarError::NotUnicode(s)) => Err(Error::invalid(
                "gemm",
                format!("{WGMMA_VARIANT_ENV} = {s:?} is not UTF-8"),
            )),
        }
    }

    /// Stages in the shared-memory ring.
    fn stages(self) -> u32 {
        match self {
            WgmmaVariant::TmaStore | WgmmaVariant::ClusterTmaStore => 3,
            _ => 4,
        }
    }

    /// Blocks a cluster (the kernels' `__cluster_dims__`).
    fn cluster(self) -> u32 {
        match self {
            WgmmaVariant::Cluster | WgmmaVariant::ClusterTmaStore | WgmmaVariant::ClusterTmaHalves => 2,
            _ => 1,
        }
    }

    /// The C staging bytes of both consumers (the TMA-store epilogues), 0 for direct stores.
    fn staging_bytes(self) -> u32 {
        match self {
            WgmmaVariant::Sync | WgmmaVariant::InFlight | WgmmaVariant::Cluster => 0,
            WgmmaVariant::TmaStore | WgmmaVariant::ClusterTmaStore => 2 * 64 * BN * 2,
            WgmmaVariant::TmaHalves | WgmmaVariant::TmaHalvesG16 | WgmmaVariant::ClusterTmaHalves => {
                64 * BN * 2
            }
        }
    }

    /// Whether the kernels store C with TMA (and take its tensor map).
    fn tma_store(self) -> bool {
        self.staging_bytes() > 0
    }

    /// Dynamic shared memory: the stages, the staging buffers, plus slack to align them to
    /// 1024 bytes.
    fn smem_bytes(self) -> u32 {
        self.stages() * (BM + BN) * BK * 2 + self.staging_bytes() + 1024
    }

    fn module(self) -> Module {
        match self {
            WgmmaVariant::Sync | WgmmaVariant::TmaHalvesG16 => GEMM_WGMMA,
            _ => GEMM_WGMMA_VARIANTS,
        }
    }

    /// The kernel for A transposed when `ta`, B when `tb`.
    pub fn symbol(self, ta: bool, tb: bool) -> String {
        let layout = ["nn", "nt", "tn", "tt"][usize::from(ta) * 2 + usize::from(tb)];
        match self {
            WgmmaVariant::Sync => format!("gemm_wgmma_bf16_{layout}"),
            v => format!("gemm_wgmma_bf16_{}_{layout}", v.name()),
        }
    }
}

/// An 8-bit float format of the fp8 kernels (OCP FP8: `e4m3` is the "FN" form, no
/// infinities, one NaN per sign; `e5m2` is IEEE-like).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fp8Format {
    /// 4 exponent bits (bias 7), 3 mantissa bits; largest 448.
    E4m3,
    /// 5 exponent bits (bias 15), 2 mantissa bits; largest 57344.
    E5m2,
}

impl Fp8Format {
    /// The kernel's symbol.
    pub fn symbol(self) -> &'static str {
        match self {
            Fp8Format::E4m3 => "gemm_wgmma_e4m3_nt",
            Fp8Format::E5m2 => "gemm_wgmma_e5m2_nt",
        }
    }

    /// The value of byte `b` (exact in f32): the reference the kernels are checked against.
    pub fn decode(self, b: u8) -> f32 {
        let sign = if b & 0x80 != 0 { -1.0f32 } else { 1.0 };
        let (e_bits, m_bits, bias) = match self {
            Fp8Format::E4m3 => (4u32, 3u32, 7i32),
            Fp8Format::E5m2 => (5, 2, 15),
        };
        let e = (u32::from(b) >> m_bits) & ((1 << e_bits) - 1);
        let m = u32::from(b) & ((1 << m_bits) - 1);
        let top = (1 << e_bits) - 1;
        let frac = m as f32 / (1u32 << m_bits) as f32;
        match self {
            Fp8Format::E4m3 if e == top && m == 7 => f32::NAN,
            Fp8Format::E5m2 if e == top => {
                if m == 0 {
                    sign * f32::INFINITY
                } else {
                    f32::NAN
                }
            }
            _ if e == 0 => sign * frac * 2f32.powi(1 - bias),
            _ => sign * (1.0 + frac) * 2f32.powi(e as i32 - bias),
        }
    }
}

/// Each `(name, elements, rows, cols)` buffer holds exactly `rows x cols` elements.
fn check_extents(bufs: [(&str, usize, usize, usize); 3]) -> Result<()> {
    for (what, have, rows, cols) in bufs {
        if rows.checked_mul(cols) != Some(have) {
            return Err(Error::invalid(
                "gemm",
                format!("{what} holds {have} elements, not {rows} x {cols}"),
            ));
        }
    }
    Ok(())
}

/// Tile rows of `C` a block computes (two consumer warpgroups of 64).
const BM: u32 = 128;
/// Tile columns of `C` a block computes (one wgmma's N).
const BN: u32 = 256;
/// K columns a stage holds (128 bytes of bf16: one swizzle row).
const BK: u32 = 64;
/// Threads a block: one producer and two consumer warpgroups.
const THREADS: u32 = 384;
/// The most dynamic shared memory a block may have on compute capability 9.0 (227 KiB).
const SMEM_LIMIT: u32 = 232_448;

/// A `CUtensorMap` passed by value (the kernel's `KilnTmaDesc`: 128 bytes, 64-byte aligned).
#[repr(C, align(64))]
#[derive(Clone, Copy)]
struct TmaDesc([u64; 16]);

// SAFETY: plain bytes of the driver's opaque tensor map, the layout of the kernel's
// `KilnTmaDesc` (16 x u64, 64-byte aligned) which takes it by value.
unsafe impl DeviceRepr for TmaDesc {}

/// Why the wgmma kernel cannot run `m x n x k` (A transposed when `ta`, B when `tb`) on
/// operands at `a` and `b`, if it cannot.
pub fn wgmma_unfit(m: usize, n: usize, k: usize, ta: bool, tb: bool, a: u64, b: u64) -> Option<String> {
    if m == 0 || n == 0 || k == 0 {
        return Some("an empty dimension".into());
    }
    let rows = [
        ("A", if ta { ("m", m) } else { ("k", k) }),
        ("B", if tb { ("k", k) } else { ("n", n) }),
    ];
    for (op, (dim, len)) in rows {
        if len % 8 != 0 {
            return Some(format!(
                "{op} is stored in rows of {dim} = {len} elements, not a multiple of 8 (TMA needs 16-byte row strides)"
            ));
        }
    }
    if a % 16 != 0 || b % 16 != 0 {
        return Some("an operand is not 16-byte aligned (TMA's rule)".into());
    }
    let limit = i32::MAX as usize - 512;
    if m > limit || n > limit || k > limit || m.saturating_mul(n) > i64::MAX as usize {
        return Some("a dimension past 2^31 - 512".into());
    }
    None
}

impl CudaBackend {
    /// Whether this device runs kiln's wgmma GEMM: compute capability 9.0 exactly (the
    /// `sm_90a` features it uses are not in later architectures).
    pub fn wgmma_supported(&self) -> bool {
        self.info().desc.compute_capability == (9, 0)
    }

    /// Whether `kiln gemm --impl kiln` (and [`GemmImpl::Wgmma`](kiln_core::linalg::GemmImpl))
    /// can use the wgmma kernel here, and why, for `kiln doctor`.
    pub fn wgmma_status(&self) -> String {
        let (ma, mi) = self.info().desc.compute_capability;
        if self.wgmma_supported() {
            format!("available (cc {ma}.{mi}): bf16 GEMM with `--impl kiln` (TMA, wgmma, {WGMMA_ARCH})")
        } else {
            format!("off: needs compute capability 9.0, this device is {ma}.{mi}; bf16 runs through cuBLAS")
        }
    }
}

/// `C = scale · A·Bᵀ` on kiln's fp8 wgmma kernel: `A` (`m x k`) and `B` (`n x k`) hold fp8
/// bytes of `format` (row-major, packed), `C` (`m x n`) is bf16, products accumulate on
/// the tensor cores (whose fp8 accumulation keeps fewer bits than f32: see
/// docs/performance.md), then are scaled and rounded once. `k` must be a multiple of 16
/// (16-byte rows for TMA).
///
/// Launch: `gemm_wgmma_{e4m3,e5m2}_nt`, a persistent grid of `min(tiles, SMs)` blocks of
/// 384 threads (a producer and two consumer warpgroups) over 128×256 tiles of `C`, 197,632
/// bytes of dynamic shared memory (4 stages).
pub struct Fp8GemmNt<'a> {
    /// `A`, `m x k` fp8 bytes.
    pub a: &'a DeviceBuffer<u8>,
    /// `B`, `n x k` fp8 bytes.
    pub b: &'a DeviceBuffer<u8>,
    /// `C`, `m x n` bf16.
    pub c: &'a mut DeviceBuffer<bf16>,
    /// `[m, n, k]`.
    pub dims: [usize; 3],
    /// The fp8 format of `A` and `B`.
    pub format: Fp8Format,
    /// The scale applied to every product, finite.
    pub scale: f32,
}

impl Op for Fp8GemmNt<'_> {
    type Output = ();

    fn run(self, cuda: &CudaBackend) -> Result<()> {
        let Fp8GemmNt {
            a,
            b,
            c,
            dims: [m, n, k],
            format,
            scale,
        } = self;
        require_wgmma(cuda)?;
        check_extents([("A", a.len(), m, k), ("B", b.len(), n, k), ("C", c.len(), m, n)])?;
        if !scale.is_finite() {
            return Err(Error::invalid(
                "gemm",
                format!("the fp8 scale {scale} is not finite"),
            ));
        }
        // fp8 rows of k bytes: TMA's 16-byte rule is k % 16 (the bf16 check asks k % 8)
        let why = if k % 16 != 0 {
            Some(format!(
                "k = {k} is not a multiple of 16 (TMA needs 16-byte fp8 rows)"
            ))
        } else {
            wgmma_unfit(m, n, k, false, true, a.device_ptr(), b.device_ptr())
        };
        if let Some(why) = why {
            return Err(Error::invalid(
                "gemm",
                format!("kiln's fp8 wgmma kernel cannot take {m} x {n} x {k}: {why}"),
            ));
        }
        let map_a = tma_map_of(cuda, a.device_ptr(), m, k, BM, true)?;
        let map_b = tma_map_of(cuda, b.device_ptr(), n, k, BN, true)?;
        launch_tiles(
            cuda,
            (GEMM_WGMMA, format.symbol(), WgmmaVariant::Sync.smem_bytes(), 1),
            [&map_a, &map_b],
            None,
            c.device_ptr(),
            [m, n, k],
            Some(scale),
        )
    }
}

/// A 2-D bf16 tensor map over `rows x cols` (row-major, `cols` contiguous) at `ptr`,
/// read in boxes of `box_rows x 64` with the 128-byte swizzle.
fn tma_map(cuda: &CudaBackend, ptr: u64, rows: usize, cols: usize, box_rows: u32) -> Result<TmaDesc> {
    tma_map_of(cuda, ptr, rows, cols, box_rows, false)
}

/// A 2-D tensor map of bf16 (or, with `bytes`, of single bytes: fp8) over `rows x cols`
/// (row-major, `cols` contiguous) at `ptr`, read in boxes of `box_rows` rows of 128 bytes
/// with the 128-byte swizzle.
fn tma_map_of(
    cuda: &CudaBackend,
    ptr: u64,
    rows: usize,
    cols: usize,
    box_rows: u32,
    bytes: bool,
) -> Result<TmaDesc> {
    let elem = if bytes { 1 } else { 2 };
    debug_assert!(box_rows <= 256 && (cols * elem) % 16 == 0);
    let mut map = TmaDesc([0; 16]);
    let dims: [u64; 2] = [cols as u64, rows as u64];
    let strides: [u64; 1] = [(cols * elem) as u64];
    let boxes: [u32; 2] = [128 / elem as u32, box_rows];
    let ty = if bytes {
        sys::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_UINT8
    } else {
        sys::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
    };
    let elem: [u32; 2] = [1, 1];
    cuda.stream()
        .context()
        .bind_to_thread()
        .map_err(|e| cuda.err("cuCtxSetCurrent", e))?;
    // SAFETY: `map` is 128 bytes, 64-byte aligned, the layout of CUtensorMap; the arrays
    // live through the call and have rank (2) entries (rank - 1 for the strides); `ptr`
    // is a live device allocation the caller sized for rows x cols elements and
    // checked 16-byte aligned with a 16-byte multiple row stride (wgmma_unfit).
    let r = unsafe {
        sys::cuTensorMapEncodeTiled(
            (&mut map as *mut TmaDesc).cast::<sys::CUtensorMap>(),
            ty,
            2,
            ptr as *mut std::ffi::c_void,
            dims.as_ptr(),
            strides.as_ptr(),
            boxes.as_ptr(),
            elem.as_ptr(),
            sys::CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
            sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B,
            sys::CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            sys::CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        )
    };
    r.result().map_err(|e| cuda.err("cuTensorMapEncodeTiled", e))?;
    Ok(map)
}

/// `C = op(A)·op(B)` on pointers whose buffers were checked to hold the extents (A
/// stored `k x m` when `ta`, else `m x k`; B stored `n x k` when `tb`, else `k x n`) with
/// `variant`'s kernel. A TMA-store variant needs C's rows a multiple of 16 bytes and C
/// 16-byte aligned (TMA's rules, as for A and B); where they are not (`n` not a multiple of
/// 8), the same pipeline with direct stores runs instead ([`WgmmaVariant::Cluster`] for the
/// cluster variants, else the default), whose results are the same.
#[allow(clippy::too_many_arguments)]
pub(crate) fn wgmma_ptr(
    cuda: &CudaBackend,
    a: u64,
    b: u64,
    c: u64,
    [m, n, k]: [usize; 3],
    ta: bool,
    tb: bool,
    variant: WgmmaVariant,
) -> Result<()> {
    require_wgmma(cuda)?;
    if let Some(why) = wgmma_unfit(m, n, k, ta, tb, a, b) {
        return Err(Error::invalid(
            "gemm",
            format!("kiln's wgmma kernel cannot take {m} x {n} x {k}: {why}; the library implementation can"),
        ));
    }
    let variant = match variant {
        v if !v.tma_store() || (n % 8 == 0 && c % 16 == 0) => v,
        v if v.cluster() > 1 => WgmmaVariant::Cluster,
        _ => WgmmaVariant::Sync,
    };
    // as stored: K-major rows in one box a stage, M/N-major ones in 64 x 64 boxes
    let map_a = if ta {
        tma_map(cuda, a, k, m, 64)?
    } else {
        tma_map(cuda, a, m, k, BM)?
    };
    // a cluster's block loads half of B's 256 rows
    let map_b = if tb {
        tma_map(cuda, b, n, k, BN / variant.cluster())?
    } else {
        tma_map(cuda, b, k, n, 64)?
    };
    // C in 64 x 64 boxes: a consumer's 64 rows, 64 columns a box
    let map_c = variant
        .tma_store()
        .then(|| tma_map(cuda, c, m, n, 64))
        .transpose()?;
    let symbol = variant.symbol(ta, tb);
    launch_tiles(
        cuda,
        (variant.module(), &symbol, variant.smem_bytes(), variant.cluster()),
        [&map_a, &map_b],
        map_c.as_ref(),
        c,
        [m, n, k],
        None,
    )
}

/// The Hopper check every entry point makes first.
fn require_wgmma(cuda: &CudaBackend) -> Result<()> {
    if cuda.wgmma_supported() {
        return Ok(());
    }
    let (x, y) = cuda.info().desc.compute_capability;
    Err(Error::Unsupported {
        op: format!(
            "kiln's wgmma GEMM (needs compute capability 9.0, this device is {x}.{y}; \
             the library implementation runs bf16 through cuBLAS)"
        ),
        backend: cuda.name(),
    })
}

/// Launch `symbol` (a kernel of `module`, taking `smem` bytes of dynamic shared memory, in
/// clusters of `cluster` blocks) over the tiles of an `m x n` C at `c`, with C's tensor map
/// after B's when it is a TMA-store kernel's, and `scale` after the three sizes when it is
/// an fp8 kernel's.
fn launch_tiles(
    cuda: &CudaBackend,
    (module, symbol, smem, cluster): (Module, &str, u32, u32),
    [map_a, map_b]: [&TmaDesc; 2],
    map_c: Option<&TmaDesc>,
    c: u64,
    [m, n, k]: [usize; 3],
    scale: Option<f32>,
) -> Result<()> {
    debug_assert!(smem <= SMEM_LIMIT);
    let f = cuda
        .module_for(Program::Module(module), WGMMA_ARCH)?
        .load_function(symbol)
        .map_err(|e| cuda.err(symbol, e))?;
    f.set_attribute(
        sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
        smem as i32,
    )
    .map_err(|e| cuda.err("cuFuncSetAttribute", e))?;
    // a persistent block an SM, each cluster walking units of `cluster` vertically adjacent
    // tiles (the kernel's pairs of tile rows), the grid whole clusters
    let cl = u64::from(cluster);
    let units = (m.div_ceil(BM as usize) as u64).div_ceil(cl) * n.div_ceil(BN as usize) as u64;
    let sms = u64::from(cuda.info().desc.multiprocessors.max(1));
    let clusters = units.min((sms / cl).max(1));
    let cfg = LaunchConfig {
        grid_dim: ((clusters * cl) as u32, 1, 1),
        block_dim: (THREADS, 1, 1),
        shared_mem_bytes: smem,
    };
    let (mi, ni, ki) = (m as i32, n as i32, k as i32);
    let stream = cuda.stream();
    let _range = cuda.range_on(symbol, stream);
    let mut l = stream.launch_builder(&f);
    l.arg(map_a).arg(map_b);
    if let Some(map_c) = map_c {
        l.arg(map_c);
    }
    l.arg(&c).arg(&mi).arg(&ni).arg(&ki);
    if let Some(s) = scale.as_ref() {
        l.arg(s);
    }
    // SAFETY: `f` is a kernel of `module` loaded in this context; the arguments are its
    // parameters in order (two KilnTmaDesc by value, a third for C for the TMA-store
    // kernels, which the caller passes exactly then, unsigned short*, three int, and a
    // float for the fp8 kernels, which the callers pass exactly then); the tensor maps
    // cover A and B as stored, whose buffers the callers checked, and TMA never reads
    // outside them (out-of-bounds boxes fill zeros); the kernel writes C only at row < m,
    // col < n, inside its m x n elements (directly, or through C's tensor map over exactly
    // those, whose stores clip at its bounds); the shared memory is the kernel's ring of
    // stages and staging buffers plus alignment slack (`smem`, the variant's), allowed by
    // the attribute set above; a cluster kernel's grid is whole clusters of its
    // `__cluster_dims__`.
    unsafe { l.launch(cfg) }.map_err(|e| cuda.err(symbol, e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_the_kernel_cannot_take_are_named() {
        assert!(wgmma_unfit(128, 256, 64, false, true, 0, 0).is_none());
        assert!(wgmma_unfit(1, 1, 8, false, true, 16, 32).is_none());
        assert!(wgmma_unfit(1, 1, 12, false, true, 0, 0)
            .unwrap()
            .contains("k = 12"));
        // the stored rows: m for a transposed A, n for a B as stored
        assert!(wgmma_unfit(12, 16, 8, true, true, 0, 0)
            .unwrap()
            .contains("m = 12"));
        assert!(wgmma_unfit(16, 12, 8, false, false, 0, 0)
            .unwrap()
            .contains("n = 12"));
        assert!(wgmma_unfit(16, 16, 12, true, false, 0, 0).is_none());
        assert!(wgmma_unfit(1, 1, 8, false, true, 8, 0)
            .unwrap()
            .contains("aligned"));
        assert!(wgmma_unfit(0, 1, 8, false, true, 0, 0).unwrap().contains("empty"));
        assert!(wgmma_unfit(1 << 31, 1, 8, false, true, 0, 0)
            .unwrap()
            .contains("2^31"));
        // fp8 decoding: the formats' landmarks
        let e4 = Fp8Format::E4m3;
        assert_eq!(e4.decode(0x7E), 448.0);
        assert_eq!(e4.decode(0x38), 1.0);
        assert_eq!(e4.decode(0xB8), -1.0);
        assert_eq!(e4.decode(0x01), 2f32.powi(-9));
        assert!(e4.decode(0x7F).is_nan() && e4.decode(0xFF).is_nan());
        assert_eq!(e4.decode(0x78), 256.0);
        let e5 = Fp8Format::E5m2;
        assert_eq!(e5.decode(0x7B), 57344.0);
        assert_eq!(e5.decode(0x3C), 1.0);
        assert_eq!(e5.decode(0x01), 2f32.powi(-16));
        assert_eq!(e5.decode(0x7C), f32::INFINITY);
        assert!(e5.decode(0x7D).is_nan());
    }

    #[test]
    fn every_variant_has_a_kernel_per_layout_and_fits_shared_memory() {
        assert_eq!(WgmmaVariant::Sync.symbol(true, false), "gemm_wgmma_bf16_tn");
        assert_eq!(WgmmaVariant::Sync.smem_bytes(), 197_632);
        assert_eq!(
            WgmmaVariant::TmaHalvesG16.symbol(false, true),
            "gemm_wgmma_bf16_tma_halves_g16_nt"
        );
        for v in WgmmaVariant::ALL {
            assert_eq!(WgmmaVariant::parse(v.name()).unwrap(), v);
            // the static mbarriers (16 bytes a stage) share the limit
            assert!(v.smem_bytes() + 16 * v.stages() <= SMEM_LIMIT, "{v:?}");
            for (ta, tb) in [(false, false), (false, true), (true, false), (true, true)] {
                let sym = v.symbol(ta, tb);
                // its one instantiation: the TMA-store kernels (taking C's tensor map) for
                // the TMA-store variants only
                let lines: Vec<&str> = v
                    .module()
                    .source
                    .lines()
                    .filter(|l| l.contains(&format!("({sym},")))
                    .collect();
                assert_eq!(lines.len(), 1, "{sym} in {}", v.module().name);
                // and the cluster kernels (declared with their cluster size) for the cluster
                // variants only
                assert_eq!(lines[0].contains("CLUSTER"), v.cluster() == 2, "{}", lines[0]);
                assert_eq!(lines[0].contains("TMA_STORE("), v.tma_store(), "{}", lines[0]);
            }
        }
        let e = WgmmaVariant::parse("fast").unwrap_err().to_string();
        assert!(
            e.contains("KILN_WGMMA_VARIANT") && e.contains("tma_halves"),
            "{e}"
        );
    }
}
