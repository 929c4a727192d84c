//! `kiln demo`: every op on the selected device, verified against the CPU, timed.

use crate::exit;
use kiln::verify::{max_rel_f32, rel_l2};
use kiln::{testing, Backend, BackendKind, CpuBackend, Runtime, UnaryOp};
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
    /// Timed repetitions per op (the median is reported).
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
    median_ms: f64,
    gbps: Option<f64>,
    tflops: Option<f64>,
    max_rel_err_vs_cpu: f64,
    rel_l2_vs_f64: f64,
    verified: bool,
    note: String,
}

#[derive(Serialize)]
struct Output {
    device: String,
    fallback_reason: Option<String>,
    rows: Vec<Row>,
    memory: Option<kiln::cuda::pool::MemoryStats>,
    pinned: Option<kiln::cuda::pool::PinnedStats>,
    all_verified: bool,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
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
        let mk = |median_ms: f64, got: &[f32], note: &str, device: String| {
            let max_rel = max_rel_f32(got, &want);
            let l2 = rel_l2(got, &want64);
            Row {
                op: format!("{}_f32", op.name()),
                device,
                size: format!("{n}"),
                elements: n,
                median_ms,
                gbps: Some(bytes / median_ms / 1e6),
                tflops: None,
                max_rel_err_vs_cpu: max_rel,
                rel_l2_vs_f64: l2,
                verified: max_rel <= ELEMENTWISE_TOL && l2 <= 1e-6,
                note: note.into(),
            }
        };
        match rt.cuda() {
            Some(b) => {
                let dx = b.upload(&x)?;
                let mut dy = b.alloc_poisoned(n)?;
                // verify the first run before timing anything
                b.unary_f32_device(op, &dx, &mut dy)?;
                let mut got = vec![0.0f32; n];
                b.download(&dy, &mut got)?;
                let times = b.time_ms(3, reps, || b.unary_f32_device(op, &dx, &mut dy))?;
                rows.push(mk(median(times), &got, "device-resident, CUDA events", b.name()));
                // host -> device -> host, as a user calling rt.sigmoid(&slice) sees it
                let mut e2e = Vec::new();
                let mut got2 = vec![0.0f32; n];
                for _ in 0..3.min(reps) {
                    got2.fill(f32::NAN);
                    let t0 = Instant::now();
                    rt.unary_into(op, &x, &mut got2)?;
                    e2e.push(t0.elapsed().as_secs_f64() * 1e3);
                }
                let mut r = mk(
                    median(e2e),
                    &got2,
                    "host slice in and out (pageable copies)",
                    b.name(),
                );
                r.op.push_str(" host->host");
                rows.push(r);
            }
            None => {
                let mut got = vec![f32::NAN; n];
                rt.unary_into(op, &x, &mut got)?;
                let verified_copy = got.clone();
                let mut times = Vec::new();
                for _ in 0..reps.min(10) {
                    let t0 = Instant::now();
                    rt.unary_into(op, &x, &mut got)?;
                    times.push(t0.elapsed().as_secs_f64() * 1e3);
                }
                rows.push(mk(
                    median(times),
                    &verified_copy,
                    &format!("{} rayon threads", cpu.threads()),
                    "cpu".into(),
                ));
            }
        }
    }
    Ok(rows)
}

/// Median nanoseconds of one cached alloc+free pair of 1 MiB on the device pool.
fn pool_rows(rt: &Runtime) -> kiln::Result<Vec<Row>> {
    let Some(b) = rt.cuda() else { return Ok(Vec::new()) };
    let mut per_pair = Vec::new();
    drop(b.alloc::<u8>(1 << 20)?); // warm: the segment is now cached
    for _ in 0..21 {
        let t0 = Instant::now();
        for _ in 0..10_000 {
            let x = b.alloc::<u8>(1 << 20)?;
            std::hint::black_box(x.device_ptr());
        }
        per_pair.push(t0.elapsed().as_secs_f64() * 1e3 / 10_000.0);
    }
    let ms = median(per_pair);
    Ok(vec![Row {
        op: "pool alloc+free 1 MiB".into(),
        device: b.name(),
        size: "1048576".into(),
        elements: 1 << 20,
        median_ms: ms,
        gbps: None,
        tflops: None,
        max_rel_err_vs_cpu: 0.0,
        rel_l2_vs_f64: 0.0,
        verified: true,
        note: format!("{:.3} us per pair, cached, host-side", ms * 1e3),
    }])
}

/// 1000 tiny dependent kernels launched eagerly and replayed as one CUDA graph; both must
/// leave every element equal to the number of kernels run.
fn launch_rows(rt: &Runtime) -> kiln::Result<Vec<Row>> {
    use kiln::core::backend::MapOp;
    use kiln::cuda::pool::DeviceBuffer;
    let Some(b) = rt.cuda() else { return Ok(Vec::new()) };
    let op = MapOp::ScaleShift { a: 1.0, b: 1.0 };
    let mut x = b.upload(&[0f32; 32])?;
    let mut y = b.alloc::<f32>(32)?;
    let work = |x: &mut DeviceBuffer<f32>, y: &mut DeviceBuffer<f32>| -> kiln::Result<()> {
        for _ in 0..500 {
            b.map_device(op, x, y)?;
            b.map_device(op, y, x)?;
        }
        Ok(())
    };
    let eager = median(b.time_ms(1, 5, || work(&mut x, &mut y))?);
    let g = b.capture(|_| work(&mut x, &mut y))?;
    let graph = median(b.time_ms(1, 5, || g.launch())?);
    let mut got = vec![0f32; 32];
    b.download(&x, &mut got)?;
    let ok = got.iter().all(|&v| v == 12_000.0);
    let row = |op: &str, ms: f64, note: String| Row {
        op: op.into(),
        device: b.name(),
        size: "1000 x 32".into(),
        elements: 32,
        median_ms: ms,
        gbps: None,
        tflops: None,
        max_rel_err_vs_cpu: if ok { 0.0 } else { f64::INFINITY },
        rel_l2_vs_f64: f64::NAN,
        verified: ok,
        note,
    };
    Ok(vec![
        row(
            "1000 tiny kernels, eager",
            eager,
            format!("{:.2} us per kernel", eager),
        ),
        row(
            "1000 tiny kernels, graph replay",
            graph,
            format!(
                "{:.2} us per kernel, {:.1}x eager; {} nodes",
                graph,
                eager / graph,
                g.nodes()
            ),
        ),
    ])
}

/// The overlapped host -> GPU -> host pipeline on pinned buffers, checked bit for bit
/// against the one-shot device op.
fn pipeline_rows(rt: &Runtime, size: &str) -> kiln::Result<Vec<Row>> {
    use kiln::core::backend::MapOp;
    use kiln::cuda::pipeline::PipelineOptions;
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
    b.map_pipelined_pinned(op, &x, &mut y, opts)?; // warm-up (streams, pool blocks)
    let mut reps = Vec::new();
    for _ in 0..3 {
        y.fill(f32::NAN);
        reps.push(b.map_pipelined_pinned(op, &x, &mut y, opts)?);
    }
    reps.sort_by(|a, c| a.seconds.total_cmp(&c.seconds));
    let r = reps[reps.len() / 2];
    // one-shot reference on the device, chunked only by the device's own memory
    let dx = b.upload(&x)?;
    let mut dy = b.alloc::<f32>(n)?;
    b.map_device(op, &dx, &mut dy)?;
    let mut want = vec![0.0f32; n];
    b.download(&dy, &mut want)?;
    let same = y.iter().zip(&want).all(|(p, q)| p.to_bits() == q.to_bits());
    Ok(vec![Row {
        op: "sigmoid_f32 pipelined h->d->h".into(),
        device: b.name(),
        size: format!("{} MiB", (n * 4) >> 20),
        elements: n,
        median_ms: r.seconds * 1e3,
        gbps: Some(r.gbps),
        tflops: None,
        max_rel_err_vs_cpu: if same { 0.0 } else { f64::INFINITY },
        rel_l2_vs_f64: f64::NAN,
        verified: same,
        note: format!(
            "pinned host buffers, {} streams x {} MiB chunks; GB/s = input bytes / wall; bitwise vs one-shot",
            r.streams,
            (r.chunk_elems * 4) >> 20
        ),
    }])
}

/// Imaging rows (filters, transposes), verified against the CPU by the facade.
fn imaging_rows(rt: &Runtime, size: &str) -> kiln::Result<Vec<Row>> {
    Ok(kiln::imaging::demo_cases(rt, size)?
        .into_iter()
        .map(|c| Row {
            op: c.op,
            device: rt.device_name(),
            gbps: Some((2 * 4 * c.elements) as f64 / c.wall_ms / 1e6),
            size: c.size,
            elements: c.elements,
            median_ms: c.wall_ms,
            tflops: None,
            max_rel_err_vs_cpu: c.err_over_tol,
            rel_l2_vs_f64: f64::NAN,
            verified: c.verified,
            note: "wall time incl. host copies; error is |dev-cpu| / tolerance".into(),
        })
        .collect())
}

/// Pricing rows, checked against closed forms (and, on a GPU, bitwise against the CPU).
fn finance_rows(rt: &Runtime, size: &str) -> kiln::Result<Vec<Row>> {
    let scale = match size {
        "quick" => 0.05,
        "full" => 1.0,
        _ => 0.25,
    };
    Ok(kiln::finance::demo_cases(rt, scale)?
        .into_iter()
        .map(|c| Row {
            op: c.op,
            device: rt.device_name(),
            size: c.size,
            elements: 0,
            median_ms: c.ms,
            gbps: None,
            tflops: None,
            max_rel_err_vs_cpu: if c.closed_form != 0.0 {
                ((c.price - c.closed_form) / c.closed_form).abs()
            } else {
                0.0
            },
            rel_l2_vs_f64: f64::NAN,
            verified: c.verified,
            note: format!(
                "price {:.5} +- {:.5} vs closed form {:.5}; {:.1} G path-steps/s",
                c.price,
                c.std_error,
                c.closed_form,
                c.path_steps_per_s / 1e9
            ),
        })
        .collect())
}

/// GEMM rows (every precision through cuBLAS or faer; on a GPU kiln's tiled kernel and the
/// naive baseline), each checked against an f64 reference by the facade before it is timed.
fn gemm_rows(rt: &Runtime, size: &str) -> kiln::Result<Vec<Row>> {
    Ok(kiln::linalg::demo_cases(rt, size)?
        .into_iter()
        .map(|c| Row {
            op: c.op,
            device: rt.device_name(),
            size: c.size,
            elements: 0,
            median_ms: c.ms,
            gbps: None,
            tflops: Some(c.tflops),
            max_rel_err_vs_cpu: c.err_over_bound,
            rel_l2_vs_f64: f64::NAN,
            verified: c.verified,
            note: format!("{:.2} TFLOP/s; error is |c-exact| / bound; {}", c.tflops, c.note),
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
    let mut rows = elementwise_rows(&rt, n, args.reps as usize)?;
    rows.extend(imaging_rows(&rt, &args.size)?);
    rows.extend(finance_rows(&rt, &args.size)?);
    rows.extend(gemm_rows(&rt, &args.size)?);
    rows.extend(pipeline_rows(&rt, &args.size)?);
    rows.extend(pool_rows(&rt)?);
    rows.extend(launch_rows(&rt)?);
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

fn print_table(o: &Output) {
    if let Some(d) = &o.device.strip_prefix("cuda") {
        println!("kiln demo on cuda{d}");
    } else {
        println!("kiln demo on the CPU");
    }
    println!(
        "{:<34} {:<7} {:>15} {:>11} {:>10} {:>14} {:>13}  check",
        "op", "device", "size", "median ms", "GB/s", "max rel vs CPU", "rel L2 vs f64"
    );
    for r in &o.rows {
        println!(
            "{:<34} {:<7} {:>15} {:>11.4} {:>10} {:>14.2e} {:>13.2e}  {}  ({})",
            r.op,
            r.device,
            r.size,
            r.median_ms,
            r.gbps.map(|g| format!("{g:.1}")).unwrap_or_else(|| "-".into()),
            r.max_rel_err_vs_cpu,
            r.rel_l2_vs_f64,
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
