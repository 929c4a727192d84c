//! Kernel characteristics read from the driver: registers, static / dynamic shared memory,
//! local memory (register spills), the per-function thread limit, and the occupancy each
//! kernel reaches at the block size and dynamic shared memory its launcher uses
//! (`kiln kernels`, `docs/kernels.md`).
//!
//! The launch shape each kernel is measured at is part of its declaration
//! ([`Kernel::block`], [`Kernel::dynamic_shared_bytes`]). The driver calls go through
//! cudarc's safe layer (`cuFuncGetAttribute`, `cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags`,
//! `cuDeviceGetAttribute`), so this module needs no `unsafe`.

use crate::kernels::Kernel;
use crate::CudaBackend;
use cudarc::driver::sys::CUdevice_attribute as A;
use kiln_core::Result;
use serde::{Deserialize, Serialize};

/// The SM limits occupancy is measured against.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct SmLimits {
    /// Resident threads per SM.
    pub max_threads: u32,
    /// Resident blocks per SM.
    pub max_blocks: u32,
    /// 32-bit registers per SM.
    pub registers: u32,
    /// Shared memory per SM in bytes.
    pub shared_bytes: u32,
    /// Shared memory the driver reserves per block in bytes.
    pub reserved_shared_per_block: u32,
    /// Streaming multiprocessors on the device.
    pub multiprocessors: u32,
}

/// One kernel's characteristics as the driver reports them for the loaded cubin.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct KernelAttributes {
    /// `extern "C"` name.
    pub symbol: String,
    /// The `kernels/*.cu` module.
    pub module: String,
    /// What it computes.
    pub computes: String,
    /// Threads per block at launch (x, y, z); `None` in files written before the table
    /// declared every kernel's launch.
    pub block: Option<[u32; 3]>,
    /// The grid, as the launcher computes it.
    pub grid: String,
    /// Registers per thread.
    pub registers: u32,
    /// Static shared memory per block in bytes.
    pub static_shared_bytes: u32,
    /// Dynamic shared memory per block at the representative launch, in bytes.
    pub dynamic_shared_bytes: u32,
    /// What the dynamic shared memory depends on.
    pub dynamic_shared_note: String,
    /// Local memory per thread in bytes (register spills and local arrays).
    pub local_bytes: u32,
    /// Constant memory in bytes.
    pub const_bytes: u32,
    /// The largest block the function can be launched with (registers bound it).
    pub max_threads_per_block: u32,
    /// The cubin's SASS architecture (e.g. 90).
    pub binary_version: u32,
    /// Resident blocks per SM at the launch block size and shared memory.
    pub blocks_per_sm: u32,
    /// Resident warps per SM.
    pub active_warps_per_sm: u32,
    /// `active_warps_per_sm` over the SM's maximum warps.
    pub occupancy: f64,
    /// The resource that bounds `blocks_per_sm` (an estimate from the SM limits:
    /// `registers`, `shared memory`, `threads`, `blocks`; `launch` when it does not fit).
    pub limited_by: String,
}

fn attr(b: &CudaBackend, a: A) -> Result<u32> {
    b.stream()
        .context()
        .attribute(a)
        .map(|v| v.max(0) as u32)
        .map_err(|e| {
            crate::cuda_err(
                "cuDeviceGetAttribute",
                &format!("cuda:{}", b.info().desc.ordinal),
                e,
            )
        })
}

/// Which resource bounds the blocks per SM (registers allocated per warp in units of 256).
fn limiter(l: &SmLimits, threads: u32, regs: u32, smem: u32, blocks: u32) -> String {
    if blocks == 0 {
        return "launch".into();
    }
    let warps = threads.div_ceil(32).max(1);
    let regs_per_warp = (regs * 32).div_ceil(256) * 256;
    let by_regs = if regs_per_warp == 0 {
        u32::MAX
    } else {
        l.registers / (regs_per_warp * warps)
    };
    let by_smem = if smem == 0 {
        u32::MAX
    } else {
        l.shared_bytes / (smem + l.reserved_shared_per_block)
    };
    let by_threads = l.max_threads / threads.max(1);
    let cands = [
        (by_regs, "registers"),
        (by_smem, "shared memory"),
        (by_threads, "threads"),
        (l.max_blocks, "blocks"),
    ];
    let min = cands.iter().map(|c| c.0).min().unwrap_or(u32::MAX);
    cands
        .iter()
        .filter(|c| c.0 == min)
        .map(|c| c.1)
        .collect::<Vec<_>>()
        .join(", ")
}

impl CudaBackend {
    /// The SM limits of this device.
    pub fn sm_limits(&self) -> Result<SmLimits> {
        Ok(SmLimits {
            max_threads: attr(self, A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR)?,
            max_blocks: attr(self, A::CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR)?,
            registers: attr(self, A::CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR)?,
            shared_bytes: attr(self, A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR)?,
            reserved_shared_per_block: attr(self, A::CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK)?,
            multiprocessors: self.info().desc.multiprocessors,
        })
    }

    /// Load `k` (compiling its module on a cache miss) and read its attributes and its
    /// occupancy at its declared launch shape.
    pub fn kernel_attributes(&self, k: Kernel, limits: &SmLimits) -> Result<KernelAttributes> {
        let f = self.function(k)?;
        let dev = format!("cuda:{}", self.info().desc.ordinal);
        let e = |op: &str| {
            let dev = dev.clone();
            let op = format!("{op} ({})", k.symbol());
            move |err| crate::cuda_err(&op, &dev, err)
        };
        let get = |v: std::result::Result<i32, _>, op: &str| v.map(|x: i32| x.max(0) as u32).map_err(e(op));
        // get_attribute binds the context first, so the occupancy call below runs in it.
        let registers = get(f.num_regs(), "cuFuncGetAttribute(NUM_REGS)")?;
        let static_shared_bytes = get(f.shared_size_bytes(), "cuFuncGetAttribute(SHARED_SIZE_BYTES)")?;
        let local_bytes = get(f.local_size_bytes(), "cuFuncGetAttribute(LOCAL_SIZE_BYTES)")?;
        let const_bytes = get(f.const_size_bytes(), "cuFuncGetAttribute(CONST_SIZE_BYTES)")?;
        let max_threads_per_block = get(
            f.max_threads_per_block(),
            "cuFuncGetAttribute(MAX_THREADS_PER_BLOCK)",
        )?;
        let binary_version = get(f.binary_version(), "cuFuncGetAttribute(BINARY_VERSION)")?;
        let (threads, dyn_smem) = (k.threads(), k.dynamic_shared_bytes());
        let blocks_per_sm = if threads <= max_threads_per_block {
            f.occupancy_max_active_blocks_per_multiprocessor(threads, dyn_smem as usize, None)
                .map_err(e("cuOccupancyMaxActiveBlocksPerMultiprocessor"))?
        } else {
            0
        };
        let active_warps_per_sm = blocks_per_sm * threads.div_ceil(32);
        let max_warps = (limits.max_threads / 32).max(1);
        Ok(KernelAttributes {
            symbol: k.symbol().into(),
            module: k.module().name.into(),
            computes: k.computes().into(),
            block: Some(k.block()),
            grid: k.grid().into(),
            registers,
            static_shared_bytes,
            dynamic_shared_bytes: dyn_smem,
            dynamic_shared_note: k.dynamic_shared_note().into(),
            local_bytes,
            const_bytes,
            max_threads_per_block,
            binary_version,
            blocks_per_sm,
            active_warps_per_sm,
            occupancy: f64::from(active_warps_per_sm) / f64::from(max_warps),
            limited_by: limiter(
                limits,
                threads,
                registers,
                static_shared_bytes + dyn_smem,
                blocks_per_sm,
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limiter_names_the_binding_resource() {
        let h100 = SmLimits {
            max_threads: 2048,
            max_blocks: 32,
            registers: 65536,
            shared_bytes: 233472,
            reserved_shared_per_block: 1024,
            multiprocessors: 132,
        };
        // 256 threads x 32 regs: 8 blocks by regs and by threads
        assert_eq!(limiter(&h100, 256, 32, 0, 8), "registers, threads");
        // 128 regs: 65536 / (4096 * 8) = 2 blocks
        assert_eq!(limiter(&h100, 256, 128, 0, 2), "registers");
        // 100 KB smem: 2 blocks
        assert_eq!(limiter(&h100, 64, 16, 100_000, 2), "shared memory");
        assert_eq!(limiter(&h100, 256, 32, 0, 0), "launch");
    }
}
