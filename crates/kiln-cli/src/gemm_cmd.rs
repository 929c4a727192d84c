//! `kiln gemm`: one (batched) matrix product on generated data, timed, optionally checked
//! against an f64 reference; prints TFLOP/s.
//!
//! Inputs are uniform in [-1, 1) (seeded), stored in the precision's type. On a GPU the
//! product runs on device-resident buffers and is timed with CUDA events (warm-up, median of
//! `--reps`); on the CPU it is faer, timed by wall clock. `--check` compares C with the exact
//! product of the stored inputs, element by element within the precision's bound
//! (`kiln::linalg::check`: every element when C has at most 65536, else a fixed sample of
//! 65536, and every element for being finite), and exits 5 when any is outside.

use kiln::core::backend::{bf16, f16};
use kiln::device::ops::MatMul;
use kiln::linalg::{self, Gemm, GemmCheck, GemmElement, GemmImpl, GemmPrecision};
use kiln::{testing, Runtime};
use kiln::{Config, DeviceRequest, Error};
use serde::Serialize;
use std::process::ExitCode;
use std::time::Instant;

const AFTER_HELP: &str = "\
Layout: row-major, C (m x n) = op(A) (m x k) . op(B) (k x n) for each of --batch products;
  A is stored m x k (k x m with --trans-a), B k x n (n x k with --trans-b).
Precisions: f32 (f32 products), tf32 (f32 storage, TF32 tensor cores on a GPU; f32 on the
  CPU), bf16 and f16 (16-bit storage, exact products); every one accumulates in f32.
Implementations: cublas (default on a GPU; faer on the CPU), kiln (kiln's own kernels: the
  tiled SIMT kernel for f32, the wgmma tensor-core kernel for bf16 on compute capability 9.0,
  one product, k a multiple of 8), naive (the seed's one-thread-per-element kernel, the
  baseline, f32). kiln and naive are CUDA kernels; kiln has none for tf32 or f16.
--check: C against the f64 product of the stored inputs, |c - exact| <= beta * sum|a||b| with
  beta = 2u_in + k*2^-23 + u_out (u_in = 2^-10 for tf32, else 0; u_out the storage's unit
  roundoff); exit 5 when any checked element is outside or not finite.
--devices: the --batch products split over devices (all, 0,1,..., cpu, cpu+all, cpu+0,1):
  chunks of whole products, shares from calibrated throughput, work stealing, C merged in
  batch order; timed by wall clock around whole runs (transfers included). A single product
  (--batch 1) has nothing to split and runs on the first device. Not with --device.
  --check also prints c_digest (FNV-1a of C's bits) to compare runs.
Example: kiln gemm --m 8192 --n 8192 --k 8192 --precision bf16 --check --json
         kiln gemm --m 512 --n 512 --k 512 --batch 64 --devices cpu+all --check --json";

/// kiln's own kernel for a precision: the wgmma tensor-core kernel for bf16, the tiled SIMT
/// kernel otherwise (which refuses all but f32 with a message naming cuBLAS).
fn kiln_impl(p: GemmPrecision) -> GemmImpl {
    if p == GemmPrecision::Bf16 {
        GemmImpl::Wgmma
    } else {
        GemmImpl::Tiled
    }
}

/// `kiln gemm` options.
#[derive(clap::Args, Debug)]
#[command(after_help = AFTER_HELP)]
pub struct Args {
    /// Rows of op(A) and C.
    #[arg(long)]
    m: usize,
    /// Columns of op(B) and C.
    #[arg(long)]
    n: usize,
    /// The summed dimension: columns of op(A), rows of op(B).
    #[arg(long)]
    k: usize,
    /// Storage precision (all accumulate in f32).
    #[arg(long, default_value = "f32", value_parser = ["f32", "tf32", "bf16", "f16"])]
    precision: String,
    /// Implementation: cublas (the default on a GPU), kiln (kiln's own: tiled f32 kernel,
    /// wgmma bf16 kernel on Hopper), naive (the seed's baseline). Omit on the CPU (faer).
    #[arg(long = "impl", value_parser = ["cublas", "kiln", "naive"])]
    imp: Option<String>,
    /// Number of products (strided batch, packed).
    #[arg(long, default_value_t = 1)]
    batch: usize,
    /// Use A transposed (A stored k x m).
    #[arg(long)]
    trans_a: bool,
    /// Use B transposed (B stored n x k).
    #[arg(long)]
    trans_b: bool,
    /// Timed repetitions (the median is reported), after 3 warm-ups on a GPU and one on the CPU.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=10000))]
    reps: u32,
    /// Compare C with an f64 reference; exit 5 if any element is outside the bound.
    #[arg(long)]
    check: bool,
    /// Print the result as one JSON object.
    #[arg(long)]
    json: bool,
    /// Split the --batch products over devices: all, 0,1,..., cpu, cpu+all or cpu+0,1
    /// (same bits per product as one device of each kind); --batch 1 runs on the first.
    #[arg(long, value_name = "DEVICES")]
    devices: Option<kiln::executor::DeviceSet>,
}

#[derive(Serialize)]
struct Summary {
    m: usize,
    n: usize,
    k: usize,
    batch: usize,
    trans_a: bool,
    trans_b: bool,
    precision: GemmPrecision,
    implementation: &'static str,
    device: String,
    fallback_reason: Option<String>,
    reps: u32,
    timing: &'static str,
    median_ms: f64,
    min_ms: f64,
    tflops: f64,
    check: Option<GemmCheck>,
    bound_factor: f64,
    /// With --check: FNV-1a (64-bit) of C's values as f32 bits (equal digests, equal C).
    #[serde(skip_serializing_if = "Option::is_none")]
    c_digest: Option<String>,
    /// With --devices: each worker's part of the last timed run.
    #[serde(skip_serializing_if = "Option::is_none")]
    workers: Option<Vec<crate::devices_arg::WorkerSplit>>,
    /// With --devices: what was split, or why nothing was.
    #[serde(skip_serializing_if = "Option::is_none")]
    devices_note: Option<String>,
}

/// Elements `--check` compares with the reference at most (each costs k multiply-adds).
const CHECK_SAMPLES: usize = 65_536;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// (median ms, min ms, check, digest of C when checked).
type Measured = (f64, f64, Option<GemmCheck>, Option<String>);

/// The inputs: uniform in [-1, 1), A from seed 1 and B from seed 2, in `T`.
fn inputs<T: GemmElement>(g: &Gemm) -> kiln::Result<(Vec<T>, Vec<T>)> {
    let gen = |n: usize, seed: u64| -> Vec<T> {
        testing::random_f32(n, -1.0, 1.0, seed)
            .into_iter()
            .map(T::from_f32)
            .collect()
    };
    Ok((gen(g.len_a()?, 1), gen(g.len_b()?, 2)))
}

/// Run once (checked if asked), then time.
fn measure<T: GemmElement>(
    rt: &Runtime,
    g: &Gemm,
    p: GemmPrecision,
    imp: GemmImpl,
    args: &Args,
) -> kiln::Result<Measured> {
    let len_c = g.validate(g.len_a()?, g.len_b()?)?;
    let (a, b) = inputs::<T>(g)?;
    let reps = args.reps as usize;
    let check = |c: &[T]| -> kiln::Result<Option<GemmCheck>> {
        if args.check {
            linalg::check(&a, &b, c, g, p, CHECK_SAMPLES).map(Some)
        } else {
            Ok(None)
        }
    };
    let digest = |c: &[T]| args.check.then(|| crate::gemm_devices::digest(c));
    match rt.cuda() {
        Some(cu) => {
            let da = cu.upload_slice(&a)?;
            let db = cu.upload_slice(&b)?;
            let mut dc = cu.alloc_poisoned_as::<T>(len_c)?;
            cu.run(MatMul {
                a: &da,
                b: &db,
                c: &mut dc,
                gemm: g,
                precision: p,
                imp,
            })?;
            let (chk, dig) = if args.check {
                let mut c = vec![T::from_f32(0.0); len_c];
                dc.copy_to_host(&mut c, cu.stream())?;
                (check(&c)?, digest(&c))
            } else {
                (None, None)
            };
            let t = cu.time_ms(3, reps, || {
                cu.run(MatMul {
                    a: &da,
                    b: &db,
                    c: &mut dc,
                    gemm: g,
                    precision: p,
                    imp,
                })
            })?;
            let min = t.iter().copied().fold(f64::INFINITY, f64::min);
            Ok((median(t), min, chk, dig))
        }
        None => {
            let c = rt.matmul_with(&a, &b, g, p, imp)?;
            let (chk, dig) = (check(&c)?, digest(&c));
            drop(c);
            let mut t = Vec::with_capacity(reps);
            for _ in 0..reps {
                let t0 = Instant::now();
                std::hint::black_box(rt.matmul_with(&a, &b, g, p, imp)?);
                t.push(t0.elapsed().as_secs_f64() * 1e3);
            }
            let min = t.iter().copied().fold(f64::INFINITY, f64::min);
            Ok((median(t), min, chk, dig))
        }
    }
}

/// `--devices` with more than one product: the batch through the executor.
fn measure_split<T: GemmElement + Send + Sync>(
    ex: &kiln::executor::Executor,
    g: &Gemm,
    p: GemmPrecision,
    imp: GemmImpl,
    args: &Args,
) -> kiln::Result<(Measured, Vec<crate::devices_arg::WorkerSplit>, usize)> {
    let (a, b) = inputs::<T>(g)?;
    let m = crate::gemm_devices::measure(ex, (&a, &b), g, p, imp, args.reps as usize)?;
    let (chk, dig) = if args.check {
        let chk = linalg::check(&a, &b, &m.c, g, p, CHECK_SAMPLES)?;
        (Some(chk), Some(crate::gemm_devices::digest(&m.c)))
    } else {
        (None, None)
    };
    Ok(((m.median_ms, m.min_ms, chk, dig), m.workers, m.chunks))
}

/// Run `kiln gemm`; see the module docs.
pub fn run(args: &Args, request: DeviceRequest, cfg: &Config) -> anyhow::Result<ExitCode> {
    let p: GemmPrecision = args.precision.parse()?;
    let g = Gemm::new(args.m, args.n, args.k)
        .transposed(args.trans_a, args.trans_b)
        .batched(args.batch);
    g.validate(g.len_a()?, g.len_b()?)?;
    crate::devices_arg::check_exclusive(args.devices.as_ref(), request)?;
    if let (Some(set), true) = (&args.devices, g.batch > 1) {
        return run_split(args, set, &g, p, cfg);
    }
    let request = args
        .devices
        .as_ref()
        .map_or(request, crate::devices_arg::first_request);
    let rt = Runtime::new(request, cfg)?;
    let gpu = rt.cuda().is_some();
    let imp = match (args.imp.as_deref(), gpu) {
        (None, _) | (Some("cublas"), true) => GemmImpl::Library,
        (Some("kiln"), true) => kiln_impl(p),
        (Some("naive"), true) => GemmImpl::Naive,
        (Some(other), _) => {
            let why = match rt.fallback_reason() {
                Some(r) => format!(" (no GPU is usable: {r})"),
                None => String::new(),
            };
            return Err(Error::invalid(
                "--impl",
                format!("{other} runs on a GPU; this run is on the CPU{why}, which multiplies with faer: omit --impl"),
            )
            .into());
        }
    };
    let (median_ms, min_ms, chk, c_digest) = match p {
        GemmPrecision::F32 | GemmPrecision::Tf32 => measure::<f32>(&rt, &g, p, imp, args)?,
        GemmPrecision::Bf16 => measure::<bf16>(&rt, &g, p, imp, args)?,
        GemmPrecision::F16 => measure::<f16>(&rt, &g, p, imp, args)?,
    };
    let implementation = match (imp, gpu) {
        (GemmImpl::Library, true) => "cublas",
        (GemmImpl::Library, false) => "faer",
        (GemmImpl::Tiled, _) => "kiln",
        (GemmImpl::Wgmma, _) => "kiln-wgmma",
        (GemmImpl::Naive, _) => "naive",
    };
    let s = Summary {
        m: g.m,
        n: g.n,
        k: g.k,
        batch: g.batch,
        trans_a: g.trans_a,
        trans_b: g.trans_b,
        precision: p,
        implementation,
        device: rt.device_name(),
        fallback_reason: rt.fallback_reason().map(str::to_string),
        reps: args.reps,
        timing: if gpu {
            "CUDA events, device-resident buffers, 3 warm-ups"
        } else {
            "wall clock, one warm-up, allocation included"
        },
        median_ms,
        min_ms,
        tflops: g.flops() / median_ms / 1e9,
        check: chk,
        bound_factor: p.bound_factor(g.k),
        c_digest,
        workers: args
            .devices
            .as_ref()
            .map(|_| crate::devices_arg::whole_on(&rt.device_name(), median_ms / 1e3)),
        devices_note: args.devices.as_ref().map(|set| {
            format!(
                "one product (--batch 1): nothing to split; it ran on the first device of --devices {set}"
            )
        }),
    };
    report(args, &s)
}

/// Prints `s` (JSON or a line) and fails with exit 5 when its check failed.
fn report(args: &Args, s: &Summary) -> anyhow::Result<ExitCode> {
    let (g, p, implementation, median_ms, min_ms) =
        (s.gemm(), s.precision, s.implementation, s.median_ms, s.min_ms);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&s)?);
    } else {
        println!(
            "gemm {g} {p} ({implementation}) on {}: {:.3} ms median of {} ({:.3} min) = {:.2} TFLOP/s ({:.1} GFLOP/s)",
            s.device,
            median_ms,
            args.reps,
            min_ms,
            s.tflops,
            s.tflops * 1e3
        );
        if let Some(c) = &s.check {
            if let Some(d) = &s.c_digest {
                println!("c_digest: {d}");
            }
            println!(
                "check: {} elements vs f64, worst |err|/bound {:.3e} (bound {:.2e}·Σ|a||b|), max |err| {:.3e}, {} non-finite: {}",
                c.checked,
                c.worst,
                s.bound_factor,
                c.max_abs_err,
                c.nonfinite,
                if c.passed { "ok" } else { "FAILED" }
            );
        }
    }
    if let Some(c) = s.check.as_ref().filter(|c| !c.passed) {
        return Err(Error::Verification {
            op: format!("gemm {g} {p} ({implementation})"),
            detail: format!(
                "worst |err|/bound {:.3e} over {} elements (max |err| {:.3e}), {} non-finite elements",
                c.worst, c.checked, c.max_abs_err, c.nonfinite
            ),
        }
        .into());
    }
    Ok(ExitCode::from(crate::exit::OK))
}

impl Summary {
    /// The problem it reports on.
    fn gemm(&self) -> Gemm {
        Gemm::new(self.m, self.n, self.k)
            .transposed(self.trans_a, self.trans_b)
            .batched(self.batch)
    }
}

/// `kiln gemm --devices` with more than one product; see `gemm_devices.rs`.
fn run_split(
    args: &Args,
    set: &kiln::executor::DeviceSet,
    g: &Gemm,
    p: GemmPrecision,
    cfg: &Config,
) -> anyhow::Result<ExitCode> {
    let (ex, label) = crate::devices_arg::open(set, cfg)?;
    let all_gpu = ex.workers().iter().all(|w| w.is_gpu());
    let imp = match args.imp.as_deref() {
        None | Some("cublas") => GemmImpl::Library,
        Some(other) if all_gpu => match other {
            "kiln" => kiln_impl(p),
            _ => GemmImpl::Naive,
        },
        Some(other) => {
            return Err(Error::invalid(
                "--impl",
                format!(
                "{other} runs on a GPU and --devices {set} opened {label}, which has the CPU: omit --impl"
            ),
            )
            .into())
        }
    };
    let ((median_ms, min_ms, chk, c_digest), workers, chunks) = match p {
        GemmPrecision::F32 | GemmPrecision::Tf32 => measure_split::<f32>(&ex, g, p, imp, args)?,
        GemmPrecision::Bf16 => measure_split::<bf16>(&ex, g, p, imp, args)?,
        GemmPrecision::F16 => measure_split::<f16>(&ex, g, p, imp, args)?,
    };
    let implementation = match (imp, all_gpu, ex.workers().iter().any(|w| w.is_gpu())) {
        (GemmImpl::Library, true, _) => "cublas",
        (GemmImpl::Library, false, true) => "cublas+faer",
        (GemmImpl::Library, false, false) => "faer",
        (GemmImpl::Tiled, _, _) => "kiln",
        (GemmImpl::Wgmma, _, _) => "kiln-wgmma",
        (GemmImpl::Naive, _, _) => "naive",
    };
    let s = Summary {
        m: g.m,
        n: g.n,
        k: g.k,
        batch: g.batch,
        trans_a: g.trans_a,
        trans_b: g.trans_b,
        precision: p,
        implementation,
        device: label,
        fallback_reason: None,
        reps: args.reps,
        timing: "wall clock around whole executor runs (transfers and merge included), one warm-up",
        median_ms,
        min_ms,
        tflops: g.flops() / median_ms / 1e9,
        check: chk,
        bound_factor: p.bound_factor(g.k),
        c_digest,
        workers: Some(workers),
        devices_note: Some(format!(
            "{} products split into {chunks} chunks over --devices {set}",
            g.batch
        )),
    };
    report(args, &s)
}
