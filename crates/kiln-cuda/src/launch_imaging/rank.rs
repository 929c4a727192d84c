//! Launchers for `kernels/rank.cu`: rank filters and grey morphology on a `(D, H, W)`
//! storage of u8, u16 or f32, bit for bit the CPU's (`kiln_cpu::imaging::rank`).
//!
//! The algorithm is chosen by window and type ([`rank_algorithm`]):
//! - a structure (non-flat grey morphology): `minmax_fp`;
//! - min/max over a full box: `minmax_box2d` (fused van Herk / Gil-Werman tile) for the
//!   (y, x) box while its tile fits 48 KiB of shared memory (boxes up to about 33×33),
//!   then a z pass (`minmax_fp` over `[kz, 1, 1]`) for a 3-D box; other footprints
//!   `minmax_fp`;
//! - a rank of 9 or 25 elements at the median: the pruned networks `rank_med9/25` (for u8
//!   in a centred 3×3 or 5×5 box on rows of whole 4-byte words, `rank_med9/25_u8x4`: four
//!   outputs a thread on packed bytes, the same bits); up to
//!   49 elements: `rank_net9/25/49`; u8 over a larger 2-D box: `rank_hist_u8`; the rest:
//!   `rank_bisect`.

use super::{grid, MAX_AXIS};
use crate::kernels::{Kernel, ScalarType};
use crate::launch::{Arg, KernelStruct};
use crate::pool::DeviceBuffer;
use crate::storage::{CudaData, CudaStorage};
use crate::CudaBackend;
use cudarc::driver::{DeviceRepr, LaunchConfig};
use kiln_core::imaging::rank::{RankElement, RankOp, RankSpec};
use kiln_core::imaging::BoundaryMode;
use kiln_core::storage::{unsupported_dtype, BackendStorage};
use kiln_core::{DType, Error, Result};

/// The window and the launch's scalars (`struct RankWin` in rank.cu).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct RankWin {
    lo: [i32; 3],
    hi: [i32; 3],
    cnt: i32,
    rank: i32,
    mode: i32,
    ckey: u32,
    dt: i32,
    d: i32,
    h: i32,
    w: i32,
}

/// Up to 49 offsets by value (`struct NetOffs` in rank.cu), and each one's linear distance
/// in elements (`(dz * h + dy) * w + dx`, read by rank_med.cu's interior loads).
#[repr(C)]
#[derive(Clone, Copy)]
struct NetOffs {
    dz: [i16; 49],
    dy: [i16; 49],
    dx: [i16; 49],
    lin: [i32; 49],
}

// SAFETY: `#[repr(C)]` structs of i32/u32 (RankWin) and i16/i32 arrays (NetOffs) with the
// field order, types and sizes of rank.cu's `RankWin` and `NetOffs`.
#[allow(unsafe_code)]
unsafe impl DeviceRepr for RankWin {}
// SAFETY: as above.
#[allow(unsafe_code)]
unsafe impl DeviceRepr for NetOffs {}
impl KernelStruct for RankWin {
    const C_NAME: &'static str = "RankWin";
}
impl KernelStruct for NetOffs {
    const C_NAME: &'static str = "NetOffs";
}
const _: () = assert!(std::mem::size_of::<RankWin>() == crate::kernels::decl::RANK_WIN.size_bytes());
const _: () = assert!(std::mem::size_of::<NetOffs>() == crate::kernels::decl::NET_OFFS.size_bytes());

/// Bytes of shared memory `minmax_box2d` needs for a `ky × kx` box.
fn box2d_smem(ky: usize, kx: usize) -> usize {
    let (ly, lx) = (32 + ky - 1, 64 + kx - 1);
    (ly * lx + ly * 64) * 4
}

const SMEM_LIMIT: usize = 48 * 1024;

/// The kernel the GPU runs for `spec` on elements of `dtype` (the z pass of a 3-D box
/// min/max is a second launch of `minmax_fp`).
pub fn rank_algorithm(spec: &RankSpec, dtype: DType) -> Kernel {
    let n = spec.count();
    let [fd, fh, fw] = spec.fshape;
    if spec.structure.is_some() {
        return Kernel::MINMAX_FP;
    }
    match spec.op {
        RankOp::Min | RankOp::Max => {
            if spec.is_box() && box2d_smem(fh, fw) <= SMEM_LIMIT {
                Kernel::MINMAX_BOX2D
            } else {
                Kernel::MINMAX_FP
            }
        }
        RankOp::Rank(r) => match n {
            9 if r == 4 => Kernel::RANK_MED9,
            25 if r == 12 => Kernel::RANK_MED25,
            0..=9 => Kernel::RANK_NET9,
            10..=25 => Kernel::RANK_NET25,
            26..=49 => Kernel::RANK_NET49,
            _ if dtype == DType::U8 && spec.is_box() && fd == 1 && n <= 65535 => Kernel::RANK_HIST_U8,
            _ => Kernel::RANK_BISECT,
        },
    }
}

fn dtype_code(op: &str, d: DType) -> Result<i32> {
    match d {
        DType::U8 => Ok(0),
        DType::U16 => Ok(1),
        DType::F32 => Ok(2),
        _ => Err(unsupported_dtype(op, d, "u8, u16, f32")),
    }
}

/// The mode's kiln_map code and the cval's key in the element type.
fn mode_key(mode: BoundaryMode, d: DType) -> (i32, u32) {
    let c = mode.cval().unwrap_or(0.0);
    let key = match d {
        DType::U8 => u8::from_cval(c).key(),
        DType::U16 => u16::from_cval(c).key(),
        _ => f32::from_cval(c).key(),
    };
    (super::mode_args(mode).0, key)
}

/// Checks a `(d, h, w)` shape for the kernels' 32-bit indices.
pub(crate) fn check_dims(op: &str, shape: [usize; 3], len: usize) -> Result<()> {
    if shape.contains(&0) {
        return Err(Error::invalid(
            op,
            format!("the input is empty (shape {shape:?})"),
        ));
    }
    kiln_core::backend::check_same_len(op, shape.iter().product(), len)?;
    if shape.iter().any(|&a| a > MAX_AXIS) {
        return Err(Error::invalid(
            op,
            format!("shape {shape:?}: every axis must be below 2^31"),
        ));
    }
    Ok(())
}

/// The offsets as a flat `[dz, dy, dx, ...]` i32 list, checked to fit.
pub(crate) fn flat_offsets(op: &str, offs: &[[isize; 3]]) -> Result<Vec<i32>> {
    offs.iter()
        .flatten()
        .map(|&o| i32::try_from(o).map_err(|_| Error::invalid(op, format!("window offset {o} is too large"))))
        .collect()
}

/// Whether every window offset's linear distance `(dz * h + dy) * w + dx` fits an i32.
fn lin_fits(spec: &RankSpec, shape: [usize; 3]) -> bool {
    let [_, h, w] = shape;
    spec.offsets().iter().all(|o| {
        let lin = (o[0] as i128 * h as i128 + o[1] as i128) * w as i128 + o[2] as i128;
        i32::try_from(lin).is_ok()
    })
}

/// Whether the median of `spec` runs four u8 outputs a thread (`rank_med*_u8x4`): u8 data,
/// a centred 3×3 or 5×5 box in (y, x), rows of whole 4-byte words (`w % 4 == 0`) and the
/// source 4-byte aligned (outputs are new pool blocks, 256-byte aligned).
///
/// On by default (the `rank` GPU tests hold them to the CPU's bits in every mode, size and
/// dtype); `KILN_MED_U8X4=0` picks the one-output kernels (an A/B knob for the bench).
fn packs_u8x4(spec: &RankSpec, shape: [usize; 3], dt: DType, src: &CudaData) -> bool {
    let [fd, fh, fw] = spec.fshape;
    !std::env::var("KILN_MED_U8X4").is_ok_and(|v| v == "0")
        && dt == DType::U8
        && fd == 1
        && fh == fw
        && (fh == 3 || fh == 5)
        && spec.is_box()
        && spec.origin == [0, 0, 0]
        && shape[2] % 4 == 0
        && ptr(src) % 4 == 0
}

/// The 32×8 block grid of the one-output-a-thread kernels.
pub(crate) fn point_cfg(shape: [usize; 3]) -> LaunchConfig {
    let [d, h, w] = shape;
    LaunchConfig {
        grid_dim: (w.div_ceil(32) as u32, grid(h.div_ceil(8)), grid(d)),
        block_dim: (32, 8, 1),
        shared_mem_bytes: 0,
    }
}

impl CudaStorage {
    /// `spec` (a rank filter or grey morphology op) on this `(d, h, w)` storage of u8, u16
    /// or f32, queued on the current stream: a new storage of the same dtype
    /// (`BackendStorage::rank_filter`).
    pub(crate) fn launch_rank_filter(
        &self,
        shape: [usize; 3],
        spec: &RankSpec,
        op: &str,
    ) -> Result<CudaStorage> {
        let dt = self.dtype();
        dtype_code(op, dt)?;
        check_dims(op, shape, self.len())?;
        let dev = self.backend().clone();
        self.use_on(dev.stream())?;
        let out = CudaStorage::alloc(&dev, dt, self.len(), op)?;
        let algo = rank_algorithm(spec, dt);
        let (med9, med25) = (algo == Kernel::RANK_MED9, algo == Kernel::RANK_MED25);
        let algo = if (med9 || med25) && !lin_fits(spec, shape) {
            // the median kernels take 32-bit linear offsets; a window spanning more (a tall
            // 3-D window on huge planes) runs the general network, same result
            if med9 {
                Kernel::RANK_NET9
            } else {
                Kernel::RANK_NET25
            }
        } else if (med9 || med25) && packs_u8x4(spec, shape, dt, self.data()) {
            if med9 {
                Kernel::RANK_MED9_U8X4
            } else {
                Kernel::RANK_MED25_U8X4
            }
        } else {
            algo
        };
        if algo == Kernel::MINMAX_BOX2D && spec.fshape[0] > 1 {
            // (y, x) box per plane, then the z pass over [kz, 1, 1]
            let tmp = CudaStorage::alloc(&dev, dt, self.len(), op)?;
            let mut plane = spec.clone();
            plane.fshape[0] = 1;
            plane.origin[0] = 0;
            plane.mask = vec![true; spec.fshape[1] * spec.fshape[2]];
            rank_launch(&dev, self.data(), tmp.data(), shape, &plane, algo)?;
            let mut zs = spec.clone();
            zs.fshape = [spec.fshape[0], 1, 1];
            zs.origin = [spec.origin[0], 0, 0];
            zs.mask = vec![true; spec.fshape[0]];
            rank_launch(&dev, tmp.data(), out.data(), shape, &zs, Kernel::MINMAX_FP)?;
        } else {
            rank_launch(&dev, self.data(), out.data(), shape, spec, algo)?;
        }
        Ok(out)
    }
}

fn ptr(d: &CudaData) -> u64 {
    match d {
        CudaData::F32(b) => b.device_ptr(),
        CudaData::F64(b) => b.device_ptr(),
        CudaData::F16(b) => b.device_ptr(),
        CudaData::BF16(b) => b.device_ptr(),
        CudaData::U8(b) => b.device_ptr(),
        CudaData::U16(b) => b.device_ptr(),
    }
}

fn data_dtype(d: &CudaData) -> DType {
    match d {
        CudaData::F32(_) => DType::F32,
        CudaData::F64(_) => DType::F64,
        CudaData::F16(_) => DType::F16,
        CudaData::BF16(_) => DType::BF16,
        CudaData::U8(_) => DType::U8,
        CudaData::U16(_) => DType::U16,
    }
}

/// Uploads a small host table (window offsets, structure values) on the current stream.
pub(crate) fn small_table<T: Copy + Default + Send + Sync + 'static>(
    cuda: &CudaBackend,
    v: &[T],
) -> Result<DeviceBuffer<T>> {
    let b: DeviceBuffer<T> = cuda.alloc(v.len().max(1))?;
    if !v.is_empty() {
        let mut padded = v.to_vec();
        padded.resize(b.len(), T::default());
        cuda.upload_into(&padded, &b, cuda.stream())?;
    }
    Ok(b)
}

/// One launch of `k` for `spec` from `src` into `dst` (same dtype and length, checked by
/// the caller: `shape`'s product).
fn rank_launch(
    cuda: &CudaBackend,
    src: &CudaData,
    dst: &CudaData,
    shape: [usize; 3],
    spec: &RankSpec,
    k: Kernel,
) -> Result<()> {
    let dt = data_dtype(src);
    let op = k.symbol();
    let code = dtype_code(op, dt)?;
    let [d, h, w] = shape;
    let offs = spec.offsets();
    let bound =
        |a: usize, f: fn(isize, isize) -> isize| offs.iter().map(|o| o[a]).reduce(f).unwrap_or(0) as i32;
    let (mc, ckey) = mode_key(spec.mode, dt);
    let win = RankWin {
        lo: [bound(0, isize::min), bound(1, isize::min), bound(2, isize::min)],
        hi: [bound(0, isize::max), bound(1, isize::max), bound(2, isize::max)],
        cnt: offs.len() as i32,
        rank: spec.rank() as i32,
        mode: mc,
        ckey,
        dt: code,
        d: d as i32,
        h: h as i32,
        w: w as i32,
    };
    let elem = ScalarType::of_dtype(dt);
    let (sp, dp) = (Arg::ptr(ptr(src), elem), Arg::ptr(ptr(dst), elem));
    let mx = i32::from(spec.op == RankOp::Max);
    let networks = [
        Kernel::RANK_NET9,
        Kernel::RANK_NET25,
        Kernel::RANK_NET49,
        Kernel::RANK_MED9,
        Kernel::RANK_MED25,
        Kernel::RANK_MED9_U8X4,
        Kernel::RANK_MED25_U8X4,
    ];
    if networks.contains(&k) {
        let mut no = NetOffs {
            dz: [0; 49],
            dy: [0; 49],
            dx: [0; 49],
            lin: [0; 49],
        };
        for (i, o) in offs.iter().enumerate().take(49) {
            let c = |v: isize| {
                i16::try_from(v).map_err(|_| Error::invalid(op, format!("window offset {v} is too large")))
            };
            (no.dz[i], no.dy[i], no.dx[i]) = (c(o[0])?, c(o[1])?, c(o[2])?);
            // |offset| < 2^15 and every axis < 2^31 (check_dims): no i64 overflow;
            // rank_algorithm sends windows whose offsets pass i32 elsewhere
            let lin = (o[0] as i64 * h as i64 + o[1] as i64) * w as i64 + o[2] as i64;
            no.lin[i] = i32::try_from(lin).unwrap_or(0);
        }
        let cfg = if k == Kernel::RANK_MED9_U8X4 || k == Kernel::RANK_MED25_U8X4 {
            point_cfg([d, h, w / 4])
        } else {
            point_cfg(shape)
        };
        // Sizes: src and dst hold d*h*w elements of the type `dt` names (the caller
        // checked the length against shape; dst is a new allocation); the kernel writes
        // only x < w, y < h, z < d and reads in-range (mapped) indices; the window count
        // is <= the network size (rank_algorithm). The u8x4 kernels read and write whole
        // 4-byte words of rows of w % 4 == 0 bytes from 4-byte aligned buffers
        // (packs_u8x4; dst is a pool block) and load the words beside x only inside the
        // row.
        let args = [sp, dp, Arg::by_value(&win), Arg::by_value(&no)];
        cuda.launch(k, cfg, &args)?;
    } else if k == Kernel::RANK_BISECT || k == Kernel::MINMAX_FP {
        let table = small_table(cuda, &flat_offsets(op, &offs)?)?;
        let sv = match spec.structure_values() {
            Some(v) => Some(small_table(cuda, &v)?),
            None => None,
        };
        let svp = sv.as_ref().map_or(0u64, |b| b.device_ptr());
        // Sizes: as above; the offset table holds 3*cnt i32 and the structure table
        // cnt f64 (or is null, and then unread); both were allocated on this stream
        // and are freed in its order after the kernel.
        let mut args = vec![sp, dp, Arg::by_value(&win), Arg::buf(&table)];
        if k == Kernel::MINMAX_FP {
            args.extend([Arg::ptr(svp, ScalarType::F64), mx.into()]);
        }
        cuda.launch(k, point_cfg(shape), &args)?;
    } else if k == Kernel::RANK_HIST_U8 {
        let [_, fh, fw] = spec.fshape;
        let strip = (4 * fh).max(64).min(h);
        if d > 65535 || h.div_ceil(strip) > 65535 {
            return Err(Error::invalid(
                op,
                format!("{d} planes exceed the 65535 the histogram kernel takes"),
            ));
        }
        let (fhi, fwi) = (fh as i32, fw as i32);
        let cy = (fh / 2) as i32 + spec.origin[1] as i32;
        let cx = (fw / 2) as i32 + spec.origin[2] as i32;
        let si = strip as i32;
        let cfg = LaunchConfig {
            grid_dim: (w.div_ceil(64) as u32, h.div_ceil(strip) as u32, d as u32),
            block_dim: (64, 1, 1),
            shared_mem_bytes: 0,
        };
        // Sizes: u8 buffers of d*h*w (the algorithm is only chosen for u8); each thread
        // writes its column of its strip (x < w, y < h); reads are mapped into range;
        // the window count fits the u16 bins (<= 65535, rank_algorithm).
        let args = [
            sp,
            dp,
            Arg::by_value(&win),
            fhi.into(),
            fwi.into(),
            cy.into(),
            cx.into(),
            si.into(),
        ];
        cuda.launch(k, cfg, &args)?;
    } else if k == Kernel::MINMAX_BOX2D {
        let [_, fh, fw] = spec.fshape;
        let smem = box2d_smem(fh, fw);
        let cy = (fh / 2) as i32 + spec.origin[1] as i32;
        let cx = (fw / 2) as i32 + spec.origin[2] as i32;
        let (kyi, kxi) = (fh as i32, fw as i32);
        let cfg = LaunchConfig {
            grid_dim: (w.div_ceil(64) as u32, grid(h.div_ceil(32)), grid(d)),
            block_dim: (256, 1, 1),
            shared_mem_bytes: smem as u32,
        };
        // Sizes: buffers of d*h*w elements of `dt`; outputs guarded by y < h, x < w; the
        // shared size is the kernel's (32+ky-1)(64+kx-1) + (32+ky-1)64 keys and at most
        // 48 KiB (rank_algorithm); inputs are mapped into range.
        let args = [
            sp,
            dp,
            Arg::by_value(&win),
            kyi.into(),
            kxi.into(),
            cy.into(),
            cx.into(),
            mx.into(),
        ];
        cuda.launch(k, cfg, &args)?;
    } else {
        return Err(Error::invalid(op, format!("{} is not a rank kernel", k.symbol())));
    }
    Ok(())
}
