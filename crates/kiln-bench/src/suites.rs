//! The suites: each is a function planning its cases for the context's device and sizes.
//! A new suite is one function and one row of [`SUITES`] (the GEMM suite goes here once
//! `kiln::linalg::matmul` exists: cases with `flops = 2mnk` and `Floor::None`, plus a
//! cuBLAS-rate ceiling in `ceilings::measure`).
//!
//! Sizes: GPU `full` are the issues' sizes (the peers' default sizes), GPU `quick` the peers'
//! `--quick` sizes; CPU sizes are small enough for CI (`quick`: the debug test build runs
//! the whole CPU quick bench in seconds).

use crate::harness::{params, Case, CaseMeta, Ctx, Floor, Measured};
use crate::verify;
use kiln::bench_support::cpu;
use kiln::core::backend::{bf16, f16, MapOp};
use kiln::device::ops::{Map, Transpose};
use kiln::kernels::Kernel;
use kiln::{testing, DType, Error, Result, UnaryOp};

/// A suite: name, one line of description, and its planner.
pub struct Suite {
    /// `--suite` name.
    pub name: &'static str,
    /// What it covers.
    pub about: &'static str,
    /// Plans the cases.
    pub plan: fn(&Ctx) -> Vec<Case>,
}

/// Every suite, in run order.
pub const SUITES: &[Suite] = &[
    Suite {
        name: "elementwise",
        about: "sigmoid on f32, f16 and bf16 storage (map kernels)",
        plan: elementwise,
    },
    Suite {
        name: "transpose",
        about: "square 2-D transpose of f32",
        plan: transpose,
    },
    Suite {
        name: "imaging",
        about: "cross4 stencil, gaussian sigma=2 (separable), 3x3x3 volume correlation",
        plan: crate::imaging::plan,
    },
    Suite {
        name: "finance",
        about: "Monte Carlo European, arithmetic Asian and a portfolio of Europeans",
        plan: crate::finance::plan,
    },
    Suite {
        name: "memory",
        about: "cached 1 MiB alloc+free pair; pinned h->d->h sigmoid pipeline (GPU)",
        plan: memory,
    },
];

/// Resolve `--suite` (`all`, or names separated by commas) to suites, in run order.
pub fn select(spec: &str) -> Result<Vec<&'static Suite>> {
    let names: Vec<&str> = spec.split(',').map(str::trim).filter(|s| !s.is_empty()).collect();
    if names.is_empty() || names.contains(&"all") {
        return Ok(SUITES.iter().collect());
    }
    for n in &names {
        if !SUITES.iter().any(|s| s.name == *n) {
            let known: Vec<&str> = SUITES.iter().map(|s| s.name).collect();
            return Err(Error::invalid(
                "bench",
                format!("unknown suite `{n}`; the suites are: all, {}", known.join(", ")),
            ));
        }
    }
    Ok(SUITES.iter().filter(|s| names.contains(&s.name)).collect())
}

/// `2^k` for an exact power of two, else the number.
pub fn pow2_label(n: usize) -> String {
    if n.is_power_of_two() {
        format!("2^{}", n.trailing_zeros())
    } else {
        n.to_string()
    }
}

fn elementwise(ctx: &Ctx) -> Vec<Case> {
    let n: usize = match (ctx.gpu(), ctx.full) {
        (true, true) => 1 << 28,
        (true, false) => 1 << 26,
        (false, true) => 1 << 24,
        (false, false) => 1 << 16,
    };
    vec![
        sigmoid_case::<f32>(n, Kernel::MAP_F32),
        sigmoid_case::<f16>(n, Kernel::MAP_F16),
        sigmoid_case::<bf16>(n, Kernel::MAP_BF16),
    ]
}

fn sigmoid_case<T: kiln::FloatElement>(n: usize, k: Kernel) -> Case {
    let s = std::mem::size_of::<T>();
    let name = format!("sigmoid_{}", T::DTYPE);
    Case {
        meta: CaseMeta {
            suite: "elementwise",
            peer_workload: (T::DTYPE != DType::BF16).then(|| name.clone()),
            workload: name,
            size: pow2_label(n),
            params: params(&[("n", n as u64)]),
            bytes: (2 * s * n) as f64,
            // neg, exp, add, divide: 4 a element by convention
            flops: (4 * n) as f64,
            floor: Floor::Memory,
            kernels: vec![k.symbol()],
        },
        run: Box::new(move |ctx| run_sigmoid::<T>(ctx, n)),
    }
}

fn run_sigmoid<T: kiln::FloatElement>(ctx: &Ctx, n: usize) -> Result<Measured> {
    let op = MapOp::Unary(UnaryOp::Sigmoid);
    let x: Vec<T> = testing::random_f32(n, -12.0, 12.0, 0x5eed)
        .into_iter()
        .map(T::from_f32)
        .collect();
    // f32: a few ulps of expf-class functions; 16-bit: one unit of the storage.
    let rel = if T::DTYPE == DType::F32 {
        8.0 * T::UNIT_ROUNDOFF
    } else {
        2.0 * T::UNIT_ROUNDOFF
    };
    let (v, against, times) = match ctx.cuda {
        Some(b) => {
            let mut want = vec![T::from_f32(f32::NAN); n];
            cpu::map(op, &x, &mut want);
            let copies = ctx.rotation((n * std::mem::size_of::<T>()) as u64);
            let dx = (0..copies)
                .map(|_| b.upload_slice(&x))
                .collect::<Result<Vec<_>>>()?;
            let mut dy = b.alloc_poisoned_as::<T>(n)?;
            b.run(Map {
                op,
                x: &dx[0],
                out: &mut dy,
            })?;
            let mut got = vec![T::from_f32(0.0); n];
            dy.copy_to_host(&mut got, b.stream())?;
            let v = verify::close(&got, |i| want[i].to_f32() as f64, rel, 1e-7);
            let t = ctx.time(|i| {
                b.run(Map {
                    op,
                    x: &dx[i % copies],
                    out: &mut dy,
                })
            })?;
            (v, "the CPU backend", t)
        }
        None => {
            let mut got = vec![T::from_f32(f32::NAN); n];
            ctx.rt.map_into(op, &x, &mut got)?;
            let v = verify::close(&got, |i| op.reference(x[i].to_f32() as f64), rel, 1e-7);
            let t = ctx.time(|_| {
                cpu::map(op, &x, &mut got);
                std::hint::black_box(&got);
                Ok(())
            })?;
            (v, "the f64 reference", t)
        }
    };
    Ok(Measured {
        warmup: ctx.warmup,
        times_ms: times,
        verified: v.ok,
        check: format!(
            "every element vs {against}: max |err|/tol = {:.3} (tol {rel:.1e}|ref| + 1e-7)",
            v.worst
        ),
        rate: None,
        note: String::new(),
    })
}

fn transpose(ctx: &Ctx) -> Vec<Case> {
    let m: usize = match (ctx.gpu(), ctx.full) {
        (true, true) => 16384,
        (true, false) => 8192,
        (false, true) => 4096,
        (false, false) => 256,
    };
    vec![Case {
        meta: CaseMeta {
            suite: "transpose",
            workload: "transpose_f32".into(),
            size: format!("{m}x{m}"),
            params: params(&[("rows", m as u64), ("cols", m as u64)]),
            bytes: (2 * 4 * m * m) as f64,
            flops: 0.0,
            floor: Floor::Memory,
            kernels: vec![Kernel::TRANSPOSE_B32.symbol()],
            peer_workload: Some(format!("transpose_{m}")),
        },
        run: Box::new(move |ctx| run_transpose(ctx, m)),
    }]
}

fn run_transpose(ctx: &Ctx, m: usize) -> Result<Measured> {
    let n = m * m;
    let x = testing::random_f32(n, -1.0, 1.0, 5);
    let exact = |got: &[f32]| {
        let bad = (0..m)
            .flat_map(|i| (0..m).map(move |j| (i, j)))
            .filter(|&(i, j)| got[j * m + i].to_bits() != x[i * m + j].to_bits())
            .count();
        (bad == 0, bad)
    };
    let ((ok, bad), times) = match ctx.cuda {
        Some(b) => {
            let copies = ctx.rotation((4 * n) as u64);
            let dx = (0..copies).map(|_| b.upload(&x)).collect::<Result<Vec<_>>>()?;
            let mut dy = b.alloc_poisoned(n)?;
            b.run(Transpose {
                x: &dx[0],
                rows: m,
                cols: m,
                out: &mut dy,
            })?;
            let mut got = vec![0.0; n];
            b.download(&dy, &mut got)?;
            let r = exact(&got);
            let t = ctx.time(|i| {
                b.run(Transpose {
                    x: &dx[i % copies],
                    rows: m,
                    cols: m,
                    out: &mut dy,
                })
            })?;
            (r, t)
        }
        None => {
            let mut got = vec![f32::NAN; n];
            cpu::transpose(&x, m, m, &mut got);
            let r = exact(&got);
            let t = ctx.time(|_| {
                cpu::transpose(&x, m, m, &mut got);
                std::hint::black_box(&got);
                Ok(())
            })?;
            (r, t)
        }
    };
    Ok(Measured {
        warmup: ctx.warmup,
        times_ms: times,
        verified: ok,
        check: format!("every element bitwise against its source: {bad} wrong"),
        rate: None,
        note: String::new(),
    })
}

fn memory(ctx: &Ctx) -> Vec<Case> {
    let mut v = vec![Case {
        meta: CaseMeta {
            suite: "memory",
            workload: "alloc_free_1MiB".into(),
            size: "1MiB".into(),
            params: params(&[("bytes", 1 << 20)]),
            bytes: 0.0,
            flops: 0.0,
            floor: Floor::None,
            kernels: Vec::new(),
            peer_workload: Some("alloc_free_1MiB".into()),
        },
        run: Box::new(run_alloc),
    }];
    if ctx.gpu() {
        let n: usize = if ctx.full { 1 << 28 } else { 1 << 24 };
        v.push(Case {
            meta: CaseMeta {
                suite: "memory",
                workload: "pipeline_sigmoid_f32".into(),
                size: pow2_label(n),
                params: params(&[("n", n as u64)]),
                // the floor counts the input once at the pinned h2d rate (the copies in and
                // out overlap on a full-duplex link)
                bytes: (4 * n) as f64,
                flops: (4 * n) as f64,
                floor: Floor::HostToDevice,
                kernels: vec![Kernel::MAP_F32.symbol()],
                peer_workload: None,
            },
            run: Box::new(move |ctx| run_pipeline(ctx, n)),
        });
    }
    v
}

fn run_alloc(ctx: &Ctx) -> Result<Measured> {
    const BYTES: usize = 1 << 20;
    let (inner, reps) = if ctx.full { (10_000, 21) } else { (2_000, 11) };
    match ctx.cuda {
        Some(b) => {
            drop(b.alloc::<u8>(BYTES)?); // the segment is now cached
            let before = b.memory_stats().num_device_allocs;
            let mut aligned = true;
            let t = ctx.time_host(reps, inner, || {
                let x = b.alloc::<u8>(BYTES)?;
                aligned &= x.device_ptr() % 256 == 0 && x.len() == BYTES;
                std::hint::black_box(x.device_ptr());
                Ok(())
            })?;
            let grew = b.memory_stats().num_device_allocs - before;
            Ok(Measured {
                warmup: 1,
                times_ms: t,
                verified: aligned && grew == 0,
                check: format!(
                    "every block 256-byte aligned and 1 MiB: {aligned}; device allocations during the timed loop: {grew} (0 = served from the cache)"
                ),
                rate: None,
                note: format!("host wall clock, {inner} pairs a sample; ms per pair"),
            })
        }
        None => {
            let mut ok = true;
            let t = ctx.time_host(reps, inner, || {
                let v: Vec<u8> = Vec::with_capacity(BYTES);
                ok &= v.capacity() >= BYTES;
                std::hint::black_box(v.as_ptr());
                Ok(())
            })?;
            Ok(Measured {
                warmup: 1,
                times_ms: t,
                verified: ok,
                check: format!("capacity >= 1 MiB every time: {ok}"),
                rate: None,
                note: format!("the system allocator, {inner} pairs a sample; ms per pair"),
            })
        }
    }
}

fn run_pipeline(ctx: &Ctx, n: usize) -> Result<Measured> {
    use kiln::memory::PipelineOptions;
    let Some(b) = ctx.cuda else {
        return Err(Error::invalid("bench", "the pipeline case needs a GPU"));
    };
    let op = MapOp::Unary(UnaryOp::Sigmoid);
    let mut x = b.pinned_pool().alloc::<f32>(n)?;
    x.copy_from_slice(&testing::random_f32(n, -12.0, 12.0, 0xfeed));
    let mut y = b.pinned_pool().alloc::<f32>(n)?;
    y.fill(f32::NAN);
    let opts = PipelineOptions::default();
    let first = b.map_pipelined_pinned(op, &x, &mut y, opts)?;
    // one-shot reference on the device
    let dx = b.upload(&x)?;
    let mut dy = b.alloc::<f32>(n)?;
    b.run(Map {
        op,
        x: &dx,
        out: &mut dy,
    })?;
    let mut want = vec![0.0f32; n];
    b.download(&dy, &mut want)?;
    drop((dx, dy));
    let wrong = y
        .iter()
        .zip(&want)
        .filter(|(p, q)| p.to_bits() != q.to_bits())
        .count();
    let reps = if ctx.full { 5 } else { 7 };
    let mut times = Vec::with_capacity(reps);
    for _ in 0..reps {
        times.push(b.map_pipelined_pinned(op, &x, &mut y, opts)?.seconds * 1e3);
    }
    Ok(Measured {
        warmup: 1,
        times_ms: times,
        verified: wrong == 0,
        check: format!("bitwise against the one-shot device map: {wrong} elements differ"),
        rate: None,
        note: format!(
            "pinned host buffers, {} streams x {} MiB chunks, wall clock first copy to last byte back",
            first.streams,
            (first.chunk_elems * 4) >> 20
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn select_resolves_names_and_rejects_unknown() {
        assert_eq!(select("all").map(|v| v.len()).ok(), Some(SUITES.len()));
        assert_eq!(select("").map(|v| v.len()).ok(), Some(SUITES.len()));
        let v = select("memory,elementwise").ok().unwrap_or_default();
        // run order is the table's, not the flag's
        assert_eq!(
            v.iter().map(|s| s.name).collect::<Vec<_>>(),
            ["elementwise", "memory"]
        );
        let e = select("elementwise,gemmm")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("unknown suite `gemmm`"), "{e}");
    }

    #[test]
    fn labels() {
        assert_eq!(pow2_label(1 << 28), "2^28");
        assert_eq!(pow2_label(1000), "1000");
    }
}
