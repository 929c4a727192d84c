//! The hardware ceilings, measured before any workload: on a GPU a device-to-device copy and
//! a pinned host-to-device copy, on the CPU a parallel host copy. A workload's floor is its
//! bytes at the ceiling that bounds it ([`Floor`]), its efficiency the floor over its median.

use crate::harness::{summarize, Ctx, Floor};
use crate::schema::Ceiling;
use kiln::Result;

/// The measured ceilings as the floors use them.
#[derive(Clone, Debug, Default)]
pub struct Ceilings {
    /// Memory copy bandwidth (device copy on a GPU, host copy on the CPU), GB/s.
    pub memory_gbps: Option<f64>,
    /// Its name in the report.
    pub memory_name: &'static str,
    /// Pinned host-to-device GB/s.
    pub h2d_gbps: Option<f64>,
}

impl Ceilings {
    /// The ceiling for a floor kind: (GB/s, name).
    pub fn for_floor(&self, f: Floor) -> Option<(f64, &'static str)> {
        match f {
            Floor::Memory => self.memory_gbps.map(|g| (g, self.memory_name)),
            Floor::HostToDevice => self.h2d_gbps.map(|g| (g, "h2d_pinned")),
            Floor::None => None,
        }
    }
}

fn ceiling(name: &str, what: String, bytes: f64, times: &[f64], verified: bool) -> Ceiling {
    let (median, p10, p90, _) = summarize(times);
    Ceiling {
        name: name.into(),
        what,
        bytes,
        median_ms: median,
        p10_ms: p10,
        p90_ms: p90,
        gbps: Some(bytes / median / 1e6),
        tflops: None,
        verified,
    }
}

/// Measure the ceilings: on a GPU a device-to-device copy (read + write bytes) and a pinned
/// host-to-device copy; on the CPU a parallel host copy (read + write bytes).
pub fn measure(ctx: &Ctx) -> Result<(Vec<Ceiling>, Ceilings)> {
    let mut out = Vec::new();
    let mut c = Ceilings::default();
    match ctx.cuda {
        Some(b) => {
            let n: usize = if ctx.full { 1 << 28 } else { 1 << 26 };
            let host: Vec<f32> = (0..n).map(|i| (i % 1_000_003) as f32).collect();
            let src = b.upload(&host)?;
            let mut dst = b.alloc_poisoned(n)?;
            b.copy_device(&src, &mut dst)?;
            let mut back = vec![0.0f32; n];
            b.download(&dst, &mut back)?;
            let ok = back == host;
            let t = ctx.time_n(3, 20, |_| b.copy_device(&src, &mut dst))?;
            let bytes = (2 * 4 * n) as f64;
            let cl = ceiling(
                "device_copy",
                format!("cuMemcpyDtoDAsync of {} MiB, read + write bytes", (4 * n) >> 20),
                bytes,
                &t,
                ok,
            );
            c.memory_gbps = cl.gbps;
            c.memory_name = "device_copy";
            out.push(cl);
            drop((src, dst));
            let mut pinned = b.pinned_pool().alloc::<f32>(n)?;
            pinned.copy_from_slice(&host);
            let mut d = b.alloc_poisoned(n)?;
            d.copy_from_host(&pinned, b.stream())?;
            back.fill(f32::NAN);
            b.download(&d, &mut back)?;
            let ok = back == host;
            let t = ctx.time_n(1, 10, |_| d.copy_from_host(&pinned, b.stream()))?;
            let cl = ceiling(
                "h2d_pinned",
                format!(
                    "cuMemcpyHtoDAsync of {} MiB from pinned host memory",
                    (4 * n) >> 20
                ),
                (4 * n) as f64,
                &t,
                ok,
            );
            c.h2d_gbps = cl.gbps;
            out.push(cl);
        }
        None => {
            use rayon::prelude::*;
            let n: usize = if ctx.full { 1 << 26 } else { 1 << 21 };
            let src: Vec<f32> = (0..n).map(|i| (i % 1_000_003) as f32).collect();
            let mut dst = vec![f32::NAN; n];
            let copy = |d: &mut [f32]| {
                d.par_chunks_mut(1 << 16)
                    .zip(src.par_chunks(1 << 16))
                    .for_each(|(d, s)| d.copy_from_slice(s));
            };
            copy(&mut dst);
            let ok = dst == src;
            let t = ctx.time_n(2, if ctx.full { 20 } else { 10 }, |_| {
                copy(&mut dst);
                std::hint::black_box(&dst);
                Ok(())
            })?;
            let cl = ceiling(
                "host_copy",
                format!(
                    "parallel copy of {} MiB on {} threads, read + write bytes",
                    (4 * n) >> 20,
                    rayon::current_num_threads()
                ),
                (2 * 4 * n) as f64,
                &t,
                ok,
            );
            c.memory_gbps = cl.gbps;
            c.memory_name = "host_copy";
            out.push(cl);
        }
    }
    Ok((out, c))
}
