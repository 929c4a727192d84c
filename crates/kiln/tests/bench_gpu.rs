//! Device-timed benchmarks at the issues' sizes (CUDA events, warm-up, median of reps),
//! each result checked before it is timed. `#[ignore]`: run on a GPU machine with
//! `--ignored --nocapture`; prints one JSON line per measurement (`BENCH {...}`).
#![allow(clippy::unwrap_used)]

use kiln::device::ops::{Filter2d, Filter3d, Map, MapLaunchProbe, PriceMc, SeparableFilter, Transpose};
use kiln::device::CudaBackend;
use kiln::{testing, Runtime};
use kiln_core::finance::{McParams, OptionSpec, OptionType, Style};
use kiln_core::imaging::{BoundaryMode, Kernel2D, Kernel3D};
use kiln_cpu::imaging::FilterPath;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn report(workload: &str, ms: f64, bytes: f64, extra: &str) {
    println!(
        "BENCH {{\"workload\": \"{workload}\", \"peer\": \"kiln\", \"ms\": {ms:.4}, \"GBps\": {:.1}{extra}}}",
        bytes / ms / 1e6
    );
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (*x as f64 - *y as f64).abs())
        .fold(0.0, f64::max)
}

fn time(b: &CudaBackend, reps: usize, f: impl FnMut() -> kiln::Result<()>) -> f64 {
    median(b.time_ms(3, reps, f).unwrap())
}

#[test]
#[ignore]
fn bench_imaging_and_transpose() {
    let Some(rt) = testing::cuda_runtime_or_skip("bench_imaging") else {
        return;
    };
    let b = rt.cuda().unwrap();
    let cpu = Runtime::cpu();
    for (h, w) in [(1080usize, 1920usize), (16384, 16384)] {
        let k = Kernel2D::preset("cross4").unwrap();
        let x = testing::random_f32(h * w, -1.0, 1.0, 1);
        let dx = b.upload(&x).unwrap();
        let mut dy = b.alloc_poisoned(h * w).unwrap();
        let mode = BoundaryMode::Reflect;
        b.run(Filter2d {
            src: &dx,
            dst: &mut dy,
            shape: [1, h, w],
            kernel: &k,
            mode,
        })
        .unwrap();
        let mut got = vec![0.0; h * w];
        b.download(&dy, &mut got).unwrap();
        let want = cpu.filter2d(&x, [h, w], &k, mode, FilterPath::Direct).unwrap();
        let err = max_abs_diff(&got, &want);
        assert!(err < 1e-5, "cross4 {h}x{w}: max |gpu-cpu| {err:e}");
        let ms = time(b, 20, || {
            b.run(Filter2d {
                src: &dx,
                dst: &mut dy,
                shape: [1, h, w],
                kernel: &k,
                mode,
            })
        });
        report(
            &format!("stencil5_{h}x{w}"),
            ms,
            (8 * h * w) as f64,
            &format!(", \"maxerr\": {err:.2e}"),
        );
    }
    {
        let g = 8192;
        let k = Kernel2D::preset("gaussian:2").unwrap();
        let sep = k.separable().unwrap();
        let x = testing::random_f32(g * g, 0.0, 1.0, 2);
        let dx = b.upload(&x).unwrap();
        let mut dy = b.alloc_poisoned(g * g).unwrap();
        let mode = BoundaryMode::Reflect;
        b.run(SeparableFilter {
            src: &dx,
            dst: &mut dy,
            shape: [1, g, g],
            sep: &sep,
            axis_offset: 1,
            mode,
        })
        .unwrap();
        let mut got = vec![0.0; g * g];
        b.download(&dy, &mut got).unwrap();
        let want = cpu.filter2d(&x, [g, g], &k, mode, FilterPath::Auto).unwrap();
        let err = max_abs_diff(&got, &want);
        assert!(err < 1e-5, "gaussian: {err:e}");
        let ms = time(b, 10, || {
            b.run(SeparableFilter {
                src: &dx,
                dst: &mut dy,
                shape: [1, g, g],
                sep: &sep,
                axis_offset: 1,
                mode,
            })
        });
        report(
            &format!("gaussian2_{g}x{g}"),
            ms,
            (8 * g * g) as f64,
            &format!(", \"maxerr\": {err:.2e}"),
        );
    }
    {
        let d = 512;
        let k = Kernel3D::new(
            [3, 3, 3],
            testing::random_f32(27, 0.0, 1.0, 3)
                .iter()
                .map(|&v| v as f64)
                .collect(),
        )
        .unwrap();
        let x = testing::random_f32(d * d * d, 0.0, 1.0, 4);
        let dx = b.upload(&x).unwrap();
        let mut dy = b.alloc_poisoned(d * d * d).unwrap();
        let mode = BoundaryMode::Constant(0.0);
        b.run(Filter3d {
            src: &dx,
            dst: &mut dy,
            shape: [d, d, d],
            kernel: &k,
            mode,
            planes: None,
        })
        .unwrap();
        let mut got = vec![0.0; d * d * d];
        b.download(&dy, &mut got).unwrap();
        let want = cpu.filter3d(&x, [d, d, d], &k, mode, FilterPath::Direct).unwrap();
        let err = max_abs_diff(&got, &want);
        assert!(err < 1e-4, "conv3d: {err:e}");
        let ms = time(b, 10, || {
            b.run(Filter3d {
                src: &dx,
                dst: &mut dy,
                shape: [d, d, d],
                kernel: &k,
                mode,
                planes: None,
            })
        });
        report(
            &format!("conv3d_{d}"),
            ms,
            (8 * d * d * d) as f64,
            &format!(", \"maxerr\": {err:.2e}"),
        );
    }
    {
        let m = 16384;
        let x = testing::random_f32(m * m, -1.0, 1.0, 5);
        let dx = b.upload(&x).unwrap();
        let mut dy = b.alloc_poisoned(m * m).unwrap();
        b.run(Transpose {
            x: &dx,
            rows: m,
            cols: m,
            out: &mut dy,
        })
        .unwrap();
        let mut got = vec![0.0; m * m];
        b.download(&dy, &mut got).unwrap();
        for (i, j) in [(0, 0), (1, 2), (m - 1, 3), (12345, m - 1), (m - 1, m - 1)] {
            assert_eq!(got[j * m + i].to_bits(), x[i * m + j].to_bits());
        }
        let ms = time(b, 20, || {
            b.run(Transpose {
                x: &dx,
                rows: m,
                cols: m,
                out: &mut dy,
            })
        });
        report(&format!("transpose_{m}"), ms, (8 * m * m) as f64, "");
    }
}

#[test]
#[ignore]
fn bench_monte_carlo() {
    let Some(rt) = testing::cuda_runtime_or_skip("bench_mc") else {
        return;
    };
    let b = rt.cuda().unwrap();
    let euro = OptionSpec::european(OptionType::Call, 100.0, 100.0, 0.05, 0.0, 0.2, 1.0);
    let exact = kiln::finance::Method::Analytic;
    let closed = rt.price(std::slice::from_ref(&euro), exact, &McParams::default())[0]
        .as_ref()
        .unwrap()
        .price;
    for (name, spec, steps) in [
        ("mc_european", euro, 256u32),
        (
            "mc_asian_arith",
            euro.with_style(Style::AsianArithmetic, Some(256), None),
            256,
        ),
    ] {
        let mc = McParams {
            paths: 1 << 24,
            steps,
            seed: 1,
            antithetic: false,
            control_variate: false,
            fast_math: false,
            rng: kiln_core::finance::Rng::Philox,
        };
        let mut last = None;
        let ms = time(b, 5, || {
            last = Some(b.run(PriceMc::new(std::slice::from_ref(&spec), &mc))?.remove(0)?);
            Ok(())
        });
        let r = last.unwrap();
        if name == "mc_european" {
            assert!(
                (r.price - closed).abs() < 4.0 * r.std_error,
                "{} vs {closed}",
                r.price
            );
        }
        let ps = (mc.paths * steps as u64) as f64;
        println!(
            "BENCH {{\"workload\": \"{name}\", \"peer\": \"kiln\", \"ms\": {ms:.3}, \"Gpathsteps_per_s\": {:.1}, \"price\": {:.4}, \"std_error\": {:.5}, \"exact\": {closed:.4}}}",
            ps / ms / 1e6,
            r.price,
            r.std_error
        );
    }
    // the portfolio: 10,000 options x 65,536 paths x 64 steps, a price per option
    let specs: Vec<OptionSpec> = (0..10_000)
        .map(|i| {
            let f = i as f64 / 10_000.0;
            OptionSpec::european(
                OptionType::Call,
                80.0 + 40.0 * f,
                120.0 - 40.0 * f,
                0.05,
                0.0,
                0.1 + 0.4 * f,
                1.0,
            )
        })
        .collect();
    let mc = McParams {
        paths: 65_536,
        steps: 64,
        seed: 2,
        antithetic: false,
        control_variate: false,
        fast_math: false,
        rng: kiln_core::finance::Rng::Philox,
    };
    let mut n_ok = 0;
    let ms = time(b, 3, || {
        n_ok = b
            .run(PriceMc::new(&specs, &mc))?
            .iter()
            .filter(|r| r.is_ok())
            .count();
        Ok(())
    });
    assert_eq!(n_ok, specs.len());
    let ps = 10_000.0 * 65_536.0 * 64.0;
    println!(
        "BENCH {{\"workload\": \"mc_portfolio\", \"peer\": \"kiln\", \"ms\": {ms:.3}, \"Gpathsteps_per_s\": {:.1}}}",
        ps / ms / 1e6
    );
}

/// Issue 3's engine table: cached alloc+free pair (host clock), 1000 tiny dependent kernels
/// eager and as one graph replay (CUDA events), and the 4 GiB pinned pipeline.
#[test]
#[ignore]
fn bench_engine() {
    use kiln_core::backend::MapOp;
    let Some(rt) = testing::cuda_runtime_or_skip("bench_engine") else {
        return;
    };
    let b = rt.cuda().unwrap();
    // alloc + free of 1 MiB, cached: median of 21 batches of 10k pairs
    drop(b.alloc::<u8>(1 << 20).unwrap());
    let mut per = Vec::new();
    for _ in 0..21 {
        let t0 = std::time::Instant::now();
        for _ in 0..10_000 {
            let x = b.alloc::<u8>(1 << 20).unwrap();
            std::hint::black_box(x.device_ptr());
        }
        per.push(t0.elapsed().as_secs_f64() * 1e6 / 10_000.0);
    }
    let us = median(per);
    println!("BENCH {{\"workload\": \"alloc_free_1MiB\", \"peer\": \"kiln\", \"ms\": {:.6}, \"us_per_op\": {us:.4}}}", us / 1e3);

    // 1000 tiny dependent kernels: x <- x + 1 on 32 floats, ping-pong between two buffers
    let n = 32;
    let mut x = b.upload(&[0f32; 32]).unwrap();
    let mut y = b.alloc::<f32>(n).unwrap();
    let op = MapOp::ScaleShift { a: 1.0, b: 1.0 };
    let work = |x: &mut kiln::memory::DeviceBuffer<f32>, y: &mut kiln::memory::DeviceBuffer<f32>| {
        for _ in 0..500 {
            b.run(Map { op, x, out: y })?;
            b.run(Map { op, x: y, out: x })?;
        }
        Ok(())
    };
    let eager = time(b, 10, || work(&mut x, &mut y));
    // host side alone: how long enqueueing the 1000 launches takes (no wait inside)
    b.synchronize().unwrap();
    let mut host = Vec::new();
    for _ in 0..10 {
        let t0 = std::time::Instant::now();
        work(&mut x, &mut y).unwrap();
        host.push(t0.elapsed().as_secs_f64() * 1e3);
        b.synchronize().unwrap();
    }
    let host = median(host);
    // the driver's share: the same launches through cudarc directly
    let raw = median(
        (0..10)
            .map(|_| {
                b.run(MapLaunchProbe {
                    op,
                    x: &mut x,
                    y: &mut y,
                    launches: 1000,
                })
                .unwrap()
            })
            .collect(),
    );
    let g = b.capture(|_| work(&mut x, &mut y)).unwrap();
    assert_eq!(g.nodes(), 1000);
    let graph = time(b, 10, || g.launch());
    // check: every launch of either kind added 1 to every element
    let mut got = vec![0f32; n];
    b.download(&x, &mut got).unwrap();
    let launches = (3 + 10) * 1000 + 10 * 1000 + 10 * 1000 + (3 + 10) * 1000;
    assert!(got.iter().all(|&v| v == launches as f32), "{got:?} vs {launches}");
    println!("BENCH {{\"workload\": \"launch_1000_tiny\", \"peer\": \"kiln-eager\", \"ms\": {eager:.4}, \"us_per_kernel\": {eager:.4}, \"host_enqueue_us_per_kernel\": {host:.4}, \"raw_cudarc_enqueue_us_per_kernel\": {raw:.4}}}");
    println!(
        "BENCH {{\"workload\": \"launch_1000_tiny\", \"peer\": \"kiln-graph\", \"ms\": {graph:.4}, \"us_per_kernel\": {graph:.4}, \"speedup\": {:.2}, \"capture_ms\": {:.3}, \"programmatic\": {}}}",
        eager / graph,
        g.capture_ms(),
        g.programmatic_launches()
    );
    drop(g);
    // the same graph without programmatic dependent launch (the path before sm_90)
    let mut plain = b.graph_options();
    plain.pdl = false;
    let g = b.capture_with(plain, |_| work(&mut x, &mut y)).unwrap();
    let graph_plain = time(b, 10, || g.launch());
    b.download(&x, &mut got).unwrap();
    let launches = launches + 13 * 1000;
    assert!(got.iter().all(|&v| v == launches as f32), "{got:?} vs {launches}");
    println!("BENCH {{\"workload\": \"launch_1000_tiny\", \"peer\": \"kiln-graph-no-pdl\", \"ms\": {graph_plain:.4}, \"us_per_kernel\": {graph_plain:.4}}}");
    drop(g);

    // 4 GiB host -> GPU sigmoid -> host through pinned buffers, a few chunk sizes
    use kiln::memory::PipelineOptions;
    let n = 1usize << 30;
    let sig = MapOp::Unary(kiln_core::UnaryOp::Sigmoid);
    let mut hx = b.pinned_pool().alloc::<f32>(n).unwrap();
    hx.copy_from_slice(&testing::random_f32(n, -12.0, 12.0, 0xfeed));
    let mut hy = b.pinned_pool().alloc::<f32>(n).unwrap();
    // the link's ceiling for this pattern: 1 GiB up and 1 GiB down at the same time, on two
    // streams from two threads (no kernel)
    {
        let m = 1usize << 28;
        let mut up = b.alloc::<f32>(m).unwrap();
        let down = b.upload(&hx[..m]).unwrap();
        let ctx = b.stream().context().clone();
        let (s1, s2) = (ctx.new_stream().unwrap(), ctx.new_stream().unwrap());
        let mut reps = Vec::new();
        for _ in 0..4 {
            let t0 = std::time::Instant::now();
            std::thread::scope(|sc| {
                let (src, dst) = (&hx[..m], &mut hy[..m]);
                let (up, down, s1, s2) = (&mut up, &down, &s1, &s2);
                sc.spawn(move || {
                    up.copy_from_host(src, s1).unwrap();
                    s1.synchronize().unwrap();
                });
                sc.spawn(move || down.copy_to_host(dst, s2).unwrap());
            });
            reps.push(2.0 * 4.0 * m as f64 / t0.elapsed().as_secs_f64() / 1e9);
        }
        reps.sort_by(f64::total_cmp);
        let both = reps[2];
        // and one way at a time
        let t0 = std::time::Instant::now();
        up.copy_from_host(&hx[..m], &s1).unwrap();
        s1.synchronize().unwrap();
        let h2d = 4.0 * m as f64 / t0.elapsed().as_secs_f64() / 1e9;
        let t0 = std::time::Instant::now();
        down.copy_to_host(&mut hy[..m], &s2).unwrap();
        let d2h = 4.0 * m as f64 / t0.elapsed().as_secs_f64() / 1e9;
        println!("BENCH {{\"workload\": \"pcie_pinned_1GiB\", \"peer\": \"kiln\", \"ms\": 0, \"h2d_GBps\": {h2d:.1}, \"d2h_GBps\": {d2h:.1}, \"both_ways_total_GBps\": {both:.1}, \"both_ways_each_GBps\": {:.1}}}", both / 2.0);
    }
    let mut best = (0.0, 0usize);
    for chunk_mib in [16usize, 32, 64] {
        let opts = PipelineOptions {
            chunk_elems: chunk_mib << 18,
            ..PipelineOptions::default()
        };
        b.map_pipelined_pinned(sig, &hx, &mut hy, opts).unwrap();
        let mut reps: Vec<f64> = (0..3)
            .map(|_| b.map_pipelined_pinned(sig, &hx, &mut hy, opts).unwrap().gbps)
            .collect();
        reps.sort_by(f64::total_cmp);
        let gbps = reps[1];
        println!("BENCH {{\"workload\": \"pipeline_sigmoid_4GiB\", \"peer\": \"kiln-{chunk_mib}MiB\", \"ms\": {:.3}, \"GBps\": {gbps:.1}}}", 4.0 * 1073.741824 / gbps);
        if gbps > best.0 {
            best = (gbps, chunk_mib);
        }
    }
    // verified bitwise against the one-shot device op on a 256 MiB slice
    let m = 64 << 20;
    let dx = b.upload(&hx[..m]).unwrap();
    let mut dy = b.alloc::<f32>(m).unwrap();
    b.run(Map {
        op: sig,
        x: &dx,
        out: &mut dy,
    })
    .unwrap();
    let mut want = vec![0f32; m];
    b.download(&dy, &mut want).unwrap();
    assert!(hy[..m].iter().zip(&want).all(|(p, q)| p.to_bits() == q.to_bits()));
    println!("pipeline best: {:.1} GB/s with {} MiB chunks", best.0, best.1);
}
