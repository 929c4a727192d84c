//! What a kernel costs the SM, from ptxas's verbose report, and the occupancy that follows
//! at a block size: `kiln kernel check`'s numbers, computed without a GPU.
//!
//! The occupancy arithmetic is the CUDA occupancy calculator's (registers allocated per warp
//! in units of 256, shared memory per block in units of the arch's granularity plus the
//! 1 KiB the driver reserves per block from sm_80, warps and blocks per SM); the per-arch
//! limits are NVIDIA's published compute-capability tables.

use super::UserSource;
use kiln_core::{Error, Result};
use std::collections::BTreeMap;

/// One kernel's resources as ptxas reports them for one arch.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct KernelResources {
    /// Registers per thread.
    pub registers: u32,
    /// Static shared memory per block, bytes.
    pub shared_bytes: u32,
    /// Stack frame (local memory) per thread, bytes.
    pub stack_bytes: u32,
    /// Bytes spilled to local memory by stores.
    pub spill_stores: u32,
    /// Bytes spilled to local memory by loads.
    pub spill_loads: u32,
    /// Constant bank 0 bytes (the parameters among them), where ptxas reports them.
    pub cmem_bytes: u32,
}

/// The limits of one compute capability the occupancy depends on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct SmLimits {
    /// Resident warps per SM.
    pub max_warps: u32,
    /// Resident blocks per SM.
    pub max_blocks: u32,
    /// 32-bit registers per SM.
    pub registers: u32,
    /// Registers per thread at most.
    pub max_registers_per_thread: u32,
    /// Shared memory per SM, bytes (the largest carve-out).
    pub shared_per_sm: u32,
    /// Shared memory one block may use (opt-in), bytes.
    pub shared_per_block: u32,
    /// Shared memory the driver reserves per block, bytes.
    pub reserved_per_block: u32,
}

/// The limits of `arch` (`sm_70` .. `sm_120`), or `None` for one kiln does not know.
pub fn sm_limits(arch: &str) -> Option<SmLimits> {
    let cc: u32 = arch.strip_prefix("sm_")?.trim_end_matches('a').parse().ok()?;
    let l = |max_warps, max_blocks, shared_kib: u32, block_kib: u32, reserved| SmLimits {
        max_warps,
        max_blocks,
        registers: 65536,
        max_registers_per_thread: 255,
        shared_per_sm: shared_kib * 1024,
        shared_per_block: block_kib * 1024,
        reserved_per_block: reserved,
    };
    Some(match cc {
        70 | 72 => l(64, 32, 96, 96, 0),
        75 => l(32, 16, 64, 64, 0),
        80 => l(64, 32, 164, 163, 1024),
        86 => l(48, 16, 100, 99, 1024),
        87 => l(48, 16, 164, 163, 1024),
        89 => l(48, 24, 100, 99, 1024),
        90 => l(64, 32, 228, 227, 1024),
        100 | 103 => l(64, 32, 228, 227, 1024),
        120 => l(48, 32, 100, 99, 1024),
        _ => return None,
    })
}

/// Occupancy of a kernel at a block size.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Occupancy {
    /// Threads per block it was computed for.
    pub block: u32,
    /// Resident blocks per SM.
    pub blocks_per_sm: u32,
    /// Resident warps per SM over the most the SM holds.
    pub fraction: f64,
    /// What bounds `blocks_per_sm`: `warps`, `registers`, `shared memory` or `blocks`.
    pub limited_by: &'static str,
}

/// The occupancy of `r` at `block` threads and `dynamic_shared` bytes per block on `limits`
/// (`None` when one block cannot fit: too many threads, registers or bytes of shared memory).
pub fn occupancy(
    r: &KernelResources,
    limits: &SmLimits,
    block: u32,
    dynamic_shared: u32,
) -> Option<Occupancy> {
    if block == 0 || block > 1024 {
        return None;
    }
    let warps = block.div_ceil(32);
    let regs_per_warp = (r.registers.max(1) * 32).div_ceil(256) * 256;
    let by_regs = limits.registers / (regs_per_warp * warps).max(1);
    let smem = r.shared_bytes + dynamic_shared;
    if smem > limits.shared_per_block {
        return None;
    }
    let per_block = smem.div_ceil(128) * 128 + limits.reserved_per_block;
    let by_smem = if smem == 0 {
        u32::MAX
    } else {
        limits.shared_per_sm / per_block
    };
    let by_warps = limits.max_warps / warps;
    let candidates = [
        (by_warps, "warps"),
        (by_regs, "registers"),
        (by_smem, "shared memory"),
        (limits.max_blocks, "blocks"),
    ];
    let (n, why) = candidates.into_iter().min_by_key(|c| c.0)?;
    if n == 0 {
        return None;
    }
    Some(Occupancy {
        block,
        blocks_per_sm: n,
        fraction: f64::from(n * warps) / f64::from(limits.max_warps),
        limited_by: why,
    })
}

/// Every kernel's resources in a ptxas `-v` report, by name.
pub fn parse_ptxas(report: &str) -> BTreeMap<String, KernelResources> {
    let mut out: BTreeMap<String, KernelResources> = BTreeMap::new();
    let mut current: Option<String> = None;
    let num_before = |line: &str, unit: &str| -> Option<u32> {
        let i = line.find(unit)?;
        line[..i].split_whitespace().last()?.parse().ok()
    };
    for line in report.lines() {
        if let Some(rest) = line
            .split_once("Compiling entry function '")
            .or_else(|| line.split_once("Function properties for "))
        {
            let name = rest.1.split(['\'', ' ']).next().unwrap_or_default().trim();
            if !name.is_empty() {
                current = Some(name.to_string());
                out.entry(name.to_string()).or_default();
            }
            continue;
        }
        let Some(name) = &current else { continue };
        let Some(r) = out.get_mut(name) else { continue };
        if line.contains("bytes stack frame") {
            r.stack_bytes = num_before(line, "bytes stack frame").unwrap_or(0);
            r.spill_stores = num_before(line, "bytes spill stores").unwrap_or(0);
            r.spill_loads = num_before(line, "bytes spill loads").unwrap_or(0);
        }
        if line.contains(" registers") && line.contains("Used ") {
            r.registers = num_before(line, "registers").unwrap_or(0);
            r.shared_bytes = num_before(line, "bytes smem").unwrap_or(0);
            r.cmem_bytes = num_before(line, "bytes cmem[0]").unwrap_or(0);
        }
    }
    out
}

impl UserSource {
    /// Compile for `arch` with ptxas's verbose report and read each kernel's resources
    /// (needs only libnvrtc, no GPU). `file` names the source in NVRTC's messages (default
    /// `<unit name>.cu`).
    pub fn resources(&self, arch: &str, file: Option<&str>) -> Result<BTreeMap<String, KernelResources>> {
        let file = file.map_or_else(|| format!("{}.cu", self.name()), str::to_string);
        let (_, log) = crate::nvrtc::compile(&self.unit(), &file, arch, &["--ptxas-options=-v".to_string()])?;
        let r = parse_ptxas(&log);
        if r.is_empty() && !crate::user::signature::kernels(self.unit().source).is_empty() {
            return Err(Error::invalid(
                "kernel check",
                format!("ptxas printed no resources for {arch}; its report was:\n{log}"),
            ));
        }
        Ok(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const REPORT: &str = "\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'saxpy' for 'sm_90'
ptxas info    : Function properties for saxpy
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 10 registers, used 0 barriers, 380 bytes cmem[0]
ptxas info    : Compiling entry function 'tile' for 'sm_90'
ptxas info    : Function properties for tile
    24 bytes stack frame, 16 bytes spill stores, 8 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 4096 bytes smem, 384 bytes cmem[0]
";

    #[test]
    fn the_report_is_read_per_kernel() {
        let r = parse_ptxas(REPORT);
        assert_eq!(
            r["saxpy"],
            KernelResources {
                registers: 10,
                cmem_bytes: 380,
                ..Default::default()
            }
        );
        let t = &r["tile"];
        assert_eq!((t.registers, t.shared_bytes, t.stack_bytes), (255, 4096, 24));
        assert_eq!((t.spill_stores, t.spill_loads), (16, 8));
    }

    #[test]
    fn occupancy_follows_the_calculator() {
        let h100 = sm_limits("sm_90").unwrap();
        let light = KernelResources {
            registers: 10,
            ..Default::default()
        };
        // 256 threads: 8 warps a block, 8 blocks fill 64 warps
        let o = occupancy(&light, &h100, 256, 0).unwrap();
        assert_eq!((o.blocks_per_sm, o.fraction, o.limited_by), (8, 1.0, "warps"));
        // 64 registers: 2048 a warp, 32 warps' worth of registers: half occupancy
        let heavy = KernelResources {
            registers: 64,
            ..Default::default()
        };
        let o = occupancy(&heavy, &h100, 256, 0).unwrap();
        assert_eq!((o.blocks_per_sm, o.fraction, o.limited_by), (4, 0.5, "registers"));
        // 100 KiB of shared memory a block: two blocks fit in 228 KiB
        let o = occupancy(&light, &h100, 128, 100 * 1024).unwrap();
        assert_eq!((o.blocks_per_sm, o.limited_by), (2, "shared memory"));
        // past the per-block limit, or 2048 threads: none
        assert!(occupancy(&light, &h100, 128, 228 * 1024).is_none());
        assert!(occupancy(&light, &h100, 2048, 0).is_none());
        // tiny blocks: the block limit
        let o = occupancy(&light, &h100, 32, 0).unwrap();
        assert_eq!((o.blocks_per_sm, o.limited_by), (32, "blocks"));
        assert!(sm_limits("sm_90a").is_some() && sm_limits("sm_61").is_none());
    }
}
