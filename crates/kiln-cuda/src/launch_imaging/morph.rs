//! Launchers for `kernels/morph.cu`: binary morphology on a `(D, H, W)` storage of u8,
//! u16 or f32 (non-zero is true) into a u8 0/1 storage, bit for bit the CPU's
//! (`kiln_cpu::imaging::morphology`).
//!
//! Iterations ping-pong between two u8 buffers. With `iterations < 1` (until nothing
//! changes) the changed flag is read back every 8 steps: steps after the fixed point change
//! nothing, so the result is the same as stopping at the first unchanged step.
//! `binary_fill_holes` is the masked dilation from zeros, then a complement.

use super::rank::{check_dims, flat_offsets, point_cfg, small_table};
use crate::kernels::{Kernel, ScalarType};
use crate::launch::Arg;
use crate::pool::DeviceBuffer;
use crate::storage::{CudaData, CudaStorage};
use crate::CudaBackend;
use cudarc::driver::LaunchConfig;
use kiln_core::imaging::morphology::BinarySpec;
use kiln_core::storage::{unsupported_dtype, BackendStorage};
use kiln_core::{DType, Error, Result};
use std::sync::Arc;

/// Steps between two reads of the changed flag when iterating to convergence.
const CHECK_EVERY: i64 = 8;

fn truth_code(op: &str, d: &CudaData) -> Result<(u64, i32)> {
    match d {
        CudaData::U8(b) => Ok((b.device_ptr(), 0)),
        CudaData::U16(b) => Ok((b.device_ptr(), 1)),
        CudaData::F32(b) => Ok((b.device_ptr(), 2)),
        CudaData::F64(_) => Err(unsupported_dtype(op, DType::F64, "u8, u16, f32")),
        CudaData::F16(_) => Err(unsupported_dtype(op, DType::F16, "u8, u16, f32")),
        CudaData::BF16(_) => Err(unsupported_dtype(op, DType::BF16, "u8, u16, f32")),
    }
}

fn u8_ptr(s: &CudaStorage) -> u64 {
    match s.data() {
        CudaData::U8(b) => b.device_ptr(),
        _ => 0,
    }
}

/// The element type of a [`truth_code`] code (the kernel dispatches on the code).
fn truth_elem(code: i32) -> ScalarType {
    match code {
        1 => ScalarType::U16,
        2 => ScalarType::F32,
        _ => ScalarType::U8,
    }
}

/// The inputs of one run: the source's pointer and type code, an optional mask.
struct Run<'a> {
    src: (u64, i32),
    mask: Option<(u64, i32, i32)>,
    spec: &'a BinarySpec,
    shape: [usize; 3],
}

impl CudaStorage {
    /// `spec` (binary erosion or dilation with its iterations) on this storage
    /// (`BackendStorage::binary_morph`).
    pub(crate) fn launch_binary_morph(
        &self,
        shape: [usize; 3],
        spec: &BinarySpec,
        op: &str,
    ) -> Result<CudaStorage> {
        let src = truth_code(op, self.data())?;
        check_dims(op, shape, self.len())?;
        let dev = self.backend().clone();
        self.use_on(dev.stream())?;
        let run = Run {
            src,
            mask: None,
            spec,
            shape,
        };
        binary_run(&dev, &run, op)
    }

    /// scipy's `binary_fill_holes` with the dilation `spec` ([`BinarySpec::fill_holes`])
    /// (`BackendStorage::binary_fill_holes`).
    pub(crate) fn launch_fill_holes(&self, shape: [usize; 3], spec: &BinarySpec) -> Result<CudaStorage> {
        let op = "binary_fill_holes";
        let (mp, mdt) = truth_code(op, self.data())?;
        check_dims(op, shape, self.len())?;
        let dev = self.backend().clone();
        self.use_on(dev.stream())?;
        let zeros = CudaStorage::zeros(&dev, DType::U8, self.len())?;
        let run = Run {
            src: (u8_ptr(&zeros), 0),
            mask: Some((mp, mdt, 1)),
            spec,
            shape,
        };
        let out = binary_run(&dev, &run, op)?;
        binary_not(&dev, &out)?;
        Ok(out)
    }
}

fn binary_run(cuda: &Arc<CudaBackend>, run: &Run<'_>, op: &str) -> Result<CudaStorage> {
    let [d, h, w] = run.shape;
    let n = d * h * w;
    let offs = flat_offsets(op, &run.spec.offsets())?;
    let cnt = (offs.len() / 3) as i32;
    let table = small_table(cuda, &offs)?;
    let changed: DeviceBuffer<i32> = cuda.alloc(1)?;
    let bufs = [
        CudaStorage::alloc(cuda, DType::U8, n, op)?,
        CudaStorage::alloc(cuda, DType::U8, n, op)?,
    ];
    let its = run.spec.iterations;
    // A terminating (monotone) run changes something in at most n steps, and a check
    // sees the changes of the CHECK_EVERY steps before it, so the first check that
    // finds none comes by n + 2 * CHECK_EVERY: past that the run is not terminating
    // (kiln-core refuses such specs first; this is the backstop). `n + 2` alone
    // refused a 1-element input at its first check.
    let cap = n as i64 + 2 + 2 * CHECK_EVERY;
    let mut src = run.src;
    let mut step = 0i64;
    loop {
        if its < 1 && step % CHECK_EVERY == 0 {
            cuda.memset_zero(&changed)?;
        }
        let dst = &bufs[(step % 2) as usize];
        binary_step(
            cuda,
            run,
            src,
            u8_ptr(dst),
            table.device_ptr(),
            cnt,
            changed.device_ptr(),
        )?;
        step += 1;
        if its >= 1 && step >= its {
            break;
        }
        if its < 1 && step % CHECK_EVERY == 0 {
            let mut flag = [0i32];
            cuda.download_into(&changed, &mut flag, cuda.stream(), op)?;
            if flag[0] == 0 {
                break;
            }
            if step > cap {
                return Err(Error::invalid(
                    op,
                    "iterations < 1 did not converge (a structure without its centre can oscillate forever)",
                ));
            }
        }
        src = (u8_ptr(dst), 0);
    }
    let [a, b] = bufs;
    Ok(if step % 2 == 1 { a } else { b })
}

fn binary_step(
    cuda: &CudaBackend,
    run: &Run<'_>,
    src: (u64, i32),
    dst: u64,
    table: u64,
    cnt: i32,
    changed: u64,
) -> Result<()> {
    let k = Kernel::BINARY_STEP;
    let [d, h, w] = run.shape;
    let (mp, mdt, minv) = run.mask.unwrap_or((0, 0, 0));
    let (dilate, border) = (i32::from(run.spec.dilate), i32::from(run.spec.border_value));
    let (di, hi, wi) = (d as i32, h as i32, w as i32);
    // Sizes: src, dst and the mask (or null, unread) hold d*h*w elements of the types
    // their codes name (checked by the caller); dst is distinct from src (ping-pong
    // buffers, or a new one against the input); the offset table holds 3*cnt i32 and
    // `changed` one i32; reads are bounds-checked in the kernel.
    let args = [
        Arg::ptr(src.0, truth_elem(src.1)),
        src.1.into(),
        Arg::ptr(dst, ScalarType::U8),
        Arg::ptr(mp, truth_elem(mdt)),
        mdt.into(),
        minv.into(),
        Arg::ptr(table, ScalarType::I32),
        cnt.into(),
        dilate.into(),
        border.into(),
        di.into(),
        hi.into(),
        wi.into(),
        Arg::ptr(changed, ScalarType::I32),
    ];
    cuda.launch(k, point_cfg(run.shape), &args)
}

fn binary_not(cuda: &CudaBackend, x: &CudaStorage) -> Result<()> {
    let k = Kernel::BINARY_NOT_U8;
    let n = x.len() as i64;
    let p = u8_ptr(x);
    let cfg = LaunchConfig {
        grid_dim: ((x.len().div_ceil(256)).clamp(1, 65535) as u32, 1, 1),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    };
    // Sizes: x is a u8 storage of n elements written on this stream; grid-stride
    // indices stay below n.
    cuda.launch(k, cfg, &[Arg::ptr(p, ScalarType::U8), n.into()])
}
