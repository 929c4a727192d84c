//! `kiln demo`: every op on the selected device, verified against the CPU, timed.
//!
//! Every row is timed the same way ([`kiln::verify::Timing`]): the first call in the process
//! alone (`first ms`: kernel compiles or cubin loads, module loads and first allocations
//! included), one warm-up call, then the median of up to `--reps` runs (`median ms`), and the
//! `timed` column says what the times cover: `device` (CUDA events around device-resident
//! buffers), `host->host pageable` (a host-slice call on a GPU), `host->host pinned` (the
//! pipelined copy through pinned buffers) or `host` (the CPU backend, host-side work).

use crate::exit;
use kiln::device::ops::{Map, Unary};
use kiln::verify::{max_rel_f32, rel_l2, time_host, wall_ms, Covers, Timing, WARMUP};
use kiln::{testing, BackendKind, CpuBackend, Runtime, UnaryOp};
use kiln::{Config, DeviceRequest};
use serde::Serialize;
use std::process::ExitCode;
use std::time::Instant;

/// `kiln demo` options.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Problem sizes: quick (seconds on any machine), default, or full (the benchmark sizes).
    #[arg(long, default_value = "default", value_parser = ["quick", "default", "full"])]
    size: String,
    /// Timed runs per row after the first call and a warm-up; the median is reported.
    /// Wall-clock rows stop after 2 s of runs once 3 have run.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=1000))]
    reps: u32,
    /// Print the rows as JSON instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct Row {
    op: String,
    device: String,
    size: String,
    elements: usize,
    /// The first call alone, ms.
    first_ms: f64,
    /// The median of the timed runs, ms.
    median_ms: f64,
    /// Timed runs behind the median.
    reps: usize,
    /// What the times cover (`device`, `host->host pageable`, `host->host pinned`, `host`).
    covers: Covers,
    gbps: Option<f64>,
    tflops: Option<f64>,
    max_rel_err_vs_cpu: f64,
    rel_l2_vs_f64: f64,
    verified: bool,
    note: String,
}

impl Row {
    /// A row timed by `t`; rates, errors and the note are filled in by the caller.
    fn timed(op: String, device: String, size: String, elements: usize, t: Timing, verified: bool) -> Row {
        Row {
            op,
            device,
            size,
            elements,
            first_ms: t.first_ms,
            median_ms: t.median_ms,
            reps: t.reps,
            covers: t.covers,
            gbps: None,
            tflops: None,
            max_rel_err_vs_cpu: 0.0,
            rel_l2_vs_f64: f64::NAN,
            verified,
            note: String::new(),
        }
    }
}

#[derive(Serialize)]
struct Output {
    device: String,
    fallback_reason: Option<String>,
    rows: Vec<Row>,
    memory: Option<kiln::memory::MemoryStats>,
    pinned: Option<kiln::memory::PinnedStats>,
    all_verified: bool,
}

/// Tolerance for an f32 element-wise op against the CPU: a few ulps of expf-class functions.
const ELEMENTWISE_TOL: f64 = 1e-5;

fn elementwise_rows(rt: &Runtime, n: usize, reps: usize) -> kiln::Result<Vec<Row>> {
    let mut rows = Vec::new();
    let cpu = CpuBackend::new();
    for &op in UnaryOp::all() {
        let x = testing::random_f32(n, -12.0, 12.0, 0x5eed);
        let want64: Vec<f64> = x.iter().map(|&v| op.reference(v as f64)).collect();
        let mut want = vec![0.0f32; n];
        cpu.unary_f32(op, &x, &mut want)?;
        let bytes = (2 * 4 * n) as f64;
        let mk = |t: Timing, got: &[f32], note: String, device: String| {
            let max_rel = max_rel_f32(got, &want);
            let l2 = rel_l2(got, &want64);
            let mut r = Row::timed(
                format!("{}_f32", op.name()),
                device,
                format!("{n}"),
                n,
                t,
                max_rel <= ELEMENTWISE_TOL && l2 <= 1e-6,
            );
            r.gbps = Some(bytes / t.median_ms / 1e6);
            r.max_rel_err_vs_cpu = max_rel;
            r.rel_l2_vs_f64 = l2;
            r.note = note;
            r
        };
        match rt.cuda() {
            Some(b) => {
                let dx = b.upload(&x)?;
                let mut dy = b.alloc_poisoned(n)?;
                // the first run, timed alone, is the one verified
                let ((), first_ms) = wall_ms(|| {
                    b.run(Unary {
                        op,
                        x: &dx,
                        out: &mut dy,
                    })?;
                    b.synchronize()
                })?;
                let mut got = vec![0.0f32; n];
                b.download(&dy, &mut got)?;
                let times = b.time_ms(WARMUP, reps, || {
                    b.run(Unary {
                        op,
                        x: &dx,
                        out: &mut dy,
                    })
                })?;
                let t = Timing::new(first_ms, times, Covers::Device);
                rows.push(mk(t, &got, "device-resident".into(), b.name()));
                // host -> device -> host, as a user calling rt.sigmoid(&slice) sees it; every
                // run writes the same values over the poison, checked after the last
                let mut got2 = vec![f32::NAN; n];
                let ((), t) = time_host(reps, Covers::HostPageable, || rt.unary_into(op, &x, &mut got2))?;
                let mut r = mk(t, &got2, "host slice in and out".into(), b.name());
                r.op.push_str(" host->host");
                rows.push(r);
            }
            None => {
                let mut got = vec![f32::NAN; n];
                let ((), t) = time_host(reps, Covers::Host, || rt.unary_into(op, &x, &mut got))?;
                rows.push(mk(
                    t,
                    &got,
                    format!("{} rayon threads", cpu.threads()),
                    "cpu".into(),
                ));
            }
        }
    }
    Ok(rows)
}

/// Median nanoseconds of one cached alloc+free pair of 1 MiB on the device pool; the first
/// pair (a device allocation) alone.
fn pool_rows(rt: &Runtime, reps: usize) -> kiln::Result<Vec<Row>> {
    let Some(b) = rt.cuda() else { return Ok(Vec::new()) };
    let (x, first_ms) = wall_ms(|| b.alloc::<u8>(1 << 20))?;
    drop(x); // the segment is now cached
    drop(b.alloc::<u8>(1 << 20)?); // warm-up
    let mut per_pair = Vec::new();
    for _ in 0..reps.max(1) {
        let t0 = Instant::now();
        for _ in 0..10_000 {
            let x = b.alloc::<u8>(1 << 20)?;
            std::hint::black_box(x.device_ptr());
        }
        per_pair.push(t0.elapsed().as_secs_f64() * 1e3 / 10_000.0);
    }
    let t = Timing::new(first_ms, per_pair, Covers::Host);
    let mut r = Row::timed(
        "pool alloc+free 1 MiB".into(),
        b.name(),
        "1048576".into(),
        1 << 20,
        t,
        true,
    );
    r.max_rel_err_vs_cpu = 0.0;
    r.rel_l2_vs_f64 = 0.0;
    r.note = format!(
        "{:.3} us per pair, cached (median of {} x 10,000); first: an alloc from the device",
        t.median_ms * 1e3,
        t.reps
    );
    Ok(vec![r])
}

/// 1000 tiny dependent kernels launched eagerly and replayed as one CUDA graph; both must
/// leave every element equal to the number of kernels run.
fn launch_rows(rt: &Runtime, reps: usize) -> kiln::Result<Vec<Row>> {
    use kiln::core::backend::MapOp;
    use kiln::memory::DeviceBuffer;
    let Some(b) = rt.cuda() else { return Ok(Vec::new()) };
    let op = MapOp::ScaleShift { a: 1.0, b: 1.0 };
    let mut x = b.upload(&[0f32; 32])?;
    let mut y = b.alloc::<f32>(32)?;
    let work = |x: &mut DeviceBuffer<f32>, y: &mut DeviceBuffer<f32>| -> kiln::Result<()> {
        for _ in 0..500 {
            b.run(Map { op, x, out: y })?;
            b.run(Map { op, x: y, out: x })?;
        }
        Ok(())
    };
    let ((), first) = wall_ms(|| {
        work(&mut x, &mut y)?;
        b.synchronize()
    })?;
    let eager = Timing::new(
        first,
        b.time_ms(WARMUP, reps, || work(&mut x, &mut y))?,
        Covers::Device,
    );
    let (g, capture_ms) = wall_ms(|| b.capture(|_| work(&mut x, &mut y)))?;
    let ((), first) = wall_ms(|| {
        g.launch()?;
        b.synchronize()
    })?;
    let graph = Timing::new(first, b.time_ms(WARMUP, reps, || g.launch())?, Covers::Device);
    // runs: eager 1 + WARMUP + reps, graph 1 + WARMUP + reps, 1000 kernels each
    let runs = 2 * (1 + WARMUP + reps);
    let mut got = vec![0f32; 32];
    b.download(&x, &mut got)?;
    let ok = got.iter().all(|&v| v == 1000.0 * runs as f32);
    let row = |op: &str, t: Timing, note: String| {
        let mut r = Row::timed(op.into(), b.name(), "1000 x 32".into(), 32, t, ok);
        r.max_rel_err_vs_cpu = if ok { 0.0 } else { f64::INFINITY };
        r.note = note;
        r
    };
    Ok(vec![
        row(
            "1000 tiny kernels, eager",
            eager,
            format!("{:.2} us per kernel", eager.median_ms),
        ),
        row(
            "1000 tiny kernels, graph replay",
            graph,
            format!(
                "{:.2} us per kernel, {:.1}x eager; {} nodes; capture {:.1} ms",
                graph.median_ms,
                eager.median_ms / graph.median_ms,
                g.nodes(),
                capture_ms
            ),
        ),
    ])
}

/// The overlapped host -> GPU -> host pipeline on pinned buffers, checked bit for bit
/// against the one-shot device op.
fn pipeline_rows(rt: &Runtime, size: &str, reps: usize) -> kiln::Result<Vec<Row>> {
    use kiln::core::backend::MapOp;
    use kiln::memory::PipelineOptions;
    let Some(b) = rt.cuda() else { return Ok(Vec::new()) };
    let n: usize = match size {
        "quick" => 16 << 20,
        "full" => 1 << 30,
        _ => 256 << 20,
    };
    let op = MapOp::Unary(UnaryOp::Sigmoid);
    let mut x = b.pinned_pool().alloc::<f32>(n)?;
    x.copy_from_slice(&testing::random_f32(n, -12.0, 12.0, 0xfeed));
    let mut y = b.pinned_pool().alloc::<f32>(n)?;
    y.fill(f32::NAN);
    let opts = PipelineOptions::default();
    // the pipeline's own wall time of each run (streams, pool blocks on the first)
    let mut runs = Vec::new();
    let (r0, t) = time_host(reps, Covers::HostPinned, || {
        let r = b.map_pipelined_pinned(op, &x, &mut y, opts)?;
        runs.push(r);
        Ok(r)
    })?;
    let timed = &runs[1 + WARMUP..];
    let t = Timing::new(
        r0.seconds * 1e3,
        timed.iter().map(|r| r.seconds * 1e3).collect(),
        t.covers,
    );
    // one-shot reference on the device, chunked only by the device's own memory
    let dx = b.upload(&x)?;
    let mut dy = b.alloc::<f32>(n)?;
    b.run(Map {
        op,
        x: &dx,
        out: &mut dy,
    })?;
    let mut want = vec![0.0f32; n];
    b.download(&dy, &mut want)?;
    let same = y.iter().zip(&want).all(|(p, q)| p.to_bits() == q.to_bits());
    let mut r = Row::timed(
        "sigmoid_f32 pipelined h->d->h".into(),
        b.name(),
        format!("{} MiB", (n * 4) >> 20),
        n,
        t,
        same,
    );
    r.gbps = Some((n * 4) as f64 / t.median_ms / 1e6);
    r.max_rel_err_vs_cpu = if same { 0.0 } else { f64::INFINITY };
    r.note = format!(
        "{} streams x {} MiB chunks; GB/s = input bytes / wall; bitwise vs one-shot",
        r0.streams,
        (r0.chunk_elems * 4) >> 20
    );
    Ok(vec![r])
}

/// Imaging rows (filters, transposes), verified against the CPU by the facade.
fn imaging_rows(rt: &Runtime, size: &str, reps: usize) -> kiln::Result<Vec<Row>> {
    Ok(kiln::imaging::demo_cases(rt, size, reps)?
        .into_iter()
        .map(|c| {
            let mut r = Row::timed(c.op, rt.device_name(), c.size, c.elements, c.timing, c.verified);
            r.gbps = Some((2 * 4 * c.elements) as f64 / c.timing.median_ms / 1e6);
            r.max_rel_err_vs_cpu = c.err_over_tol;
            r.note = "error is |dev-cpu| / tolerance".into();
            r
        })
        .collect())
}

/// Pricing rows, checked against closed forms (and, on a GPU, bitwise against the CPU).
fn finance_rows(rt: &Runtime, size: &str, reps: usize) -> kiln::Result<Vec<Row>> {
    let scale = match size {
        "quick" => 0.05,
        "full" => 1.0,
        _ => 0.25,
    };
    Ok(kiln::finance::demo_cases(rt, scale, reps)?
        .into_iter()
        .map(|c| {
            let mut r = Row::timed(c.op, rt.device_name(), c.size, 0, c.timing, c.verified);
            r.max_rel_err_vs_cpu = if c.closed_form != 0.0 {
                ((c.price - c.closed_form) / c.closed_form).abs()
            } else {
                0.0
            };
            r.note = format!(
                "price {:.5} +- {:.5} vs {} {:.5}; {:.1} G path-steps/s",
                c.price,
                c.std_error,
                c.reference,
                c.closed_form,
                c.path_steps_per_s / 1e9
            );
            r
        })
        .collect())
}

/// GEMM rows (every precision through cuBLAS or faer; on a GPU kiln's tiled kernel and the
/// naive baseline), each checked against an f64 reference by the facade.
fn gemm_rows(rt: &Runtime, size: &str, reps: usize) -> kiln::Result<Vec<Row>> {
    Ok(kiln::linalg::demo_cases(rt, size, reps)?
        .into_iter()
        .map(|c| {
            let mut r = Row::timed(c.op, rt.device_name(), c.size, 0, c.timing, c.verified);
            r.tflops = Some(c.tflops);
            r.max_rel_err_vs_cpu = c.err_over_bound;
            r.note = format!("{:.2} TFLOP/s; error is |c-exact| / bound; {}", c.tflops, c.note);
            r
        })
        .collect())
}

/// Run the demo; exit 5 if any op fails verification.
pub fn run(args: &Args, request: DeviceRequest, cfg: &Config) -> anyhow::Result<ExitCode> {
    let rt = Runtime::new(request, cfg)?;
    let gpu = rt.kind() == BackendKind::Cuda;
    let n = match (args.size.as_str(), gpu) {
        ("quick", _) => 1 << 20,
        ("full", true) => 1 << 28,
        ("full", false) => 1 << 26,
        (_, true) => 1 << 26,
        (_, false) => 1 << 24,
    };
    let reps = args.reps as usize;
    let mut rows = elementwise_rows(&rt, n, reps)?;
    rows.extend(imaging_rows(&rt, &args.size, reps)?);
    rows.extend(finance_rows(&rt, &args.size, reps)?);
    rows.extend(gemm_rows(&rt, &args.size, reps)?);
    rows.extend(pipeline_rows(&rt, &args.size, reps)?);
    rows.extend(pool_rows(&rt, reps)?);
    rows.extend(launch_rows(&rt, reps)?);
    let all_verified = rows.iter().all(|r| r.verified);
    let out = Output {
        device: rt.device_name(),
        fallback_reason: rt.fallback_reason().map(str::to_string),
        rows,
        memory: rt.memory_stats(),
        pinned: rt.cuda().map(|b| b.pinned_pool().stats()),
        all_verified,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        print_table(&out);
    }
    Ok(ExitCode::from(if all_verified { exit::OK } else { exit::VERIFY }))
}

/// A measure in `{:.2e}` form, or `-` where the column does not apply to the row (NaN).
fn sci_or_dash(x: f64) -> String {
    if x.is_nan() {
        "-".into()
    } else {
        format!("{x:.2e}")
    }
}

fn print_table(o: &Output) {
    if let Some(d) = &o.device.strip_prefix("cuda") {
        println!("kiln demo on cuda{d}");
    } else {
        println!("kiln demo on the CPU");
    }
    println!(
        "{:<34} {:<7} {:>15} {:>10} {:>11} {:>4} {:<19} {:>10} {:>14} {:>13}  check",
        "op",
        "device",
        "size",
        "first ms",
        "median ms",
        "runs",
        "timed",
        "GB/s",
        "max rel vs CPU",
        "rel L2 vs f64"
    );
    for r in &o.rows {
        println!(
            "{:<34} {:<7} {:>15} {:>10.3} {:>11.4} {:>4} {:<19} {:>10} {:>14} {:>13}  {}  ({})",
            r.op,
            r.device,
            r.size,
            r.first_ms,
            r.median_ms,
            r.reps,
            r.covers.name(),
            r.gbps.map(|g| format!("{g:.1}")).unwrap_or_else(|| "-".into()),
            sci_or_dash(r.max_rel_err_vs_cpu),
            sci_or_dash(r.rel_l2_vs_f64),
            if r.verified { "ok" } else { "FAIL" },
            r.note
        );
    }
    if let Some(m) = &o.memory {
        let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
        println!(
            "device pool: allocated {:.1} MiB (peak {:.1}), reserved {:.1} MiB (peak {:.1}); {} allocs, {} frees, {} device allocs, {} retries, {} OOMs",
            mib(m.allocated_bytes),
            mib(m.allocated_bytes_peak),
            mib(m.reserved_bytes),
            mib(m.reserved_bytes_peak),
            m.num_allocs,
            m.num_frees,
            m.num_device_allocs,
            m.num_alloc_retries,
            m.num_ooms
        );
    }
    if let Some(p) = &o.pinned {
        let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
        println!(
            "pinned host pool: allocated {:.1} MiB, reserved {:.1} MiB (peak {:.1}); {} allocs, {} cache hits, {} host allocs",
            mib(p.allocated_bytes),
            mib(p.reserved_bytes),
            mib(p.reserved_bytes_peak),
            p.num_allocs,
            p.num_cache_hits,
            p.num_host_allocs
        );
    }
    if !o.all_verified {
        println!("verification FAILED for at least one op");
    }
}
