//! Graphs with and without programmatic dependent launch (`graph_pdl.rs`): the same chains,
//! bitwise the same results; and the replay cost of 1000 tiny dependent kernels each way.
//!
//! GPU tests: run with `--features gpu-tests` (skipped where no GPU is usable, failed there
//! instead when `KILN_REQUIRE_GPU=1`). The timing is `#[ignore]`: on a GPU machine,
//! `graph_pdl-* --ignored --nocapture bench_graph_replay` prints one `BENCH {...}` line per way.
#![allow(clippy::unwrap_used)]

use kiln_core::backend::MapOp;
use kiln_core::UnaryOp;
use kiln_cuda::ops::{Axpy, Map};
use kiln_cuda::pool::DeviceBuffer;
use kiln_cuda::{discovery, CudaBackend, GraphOptions, KernelCache};

fn backend_or_skip(test: &str) -> Option<(CudaBackend, tempfile::TempDir)> {
    if let Some(reason) = discovery::no_gpu_reason() {
        kiln_testkit::skip_unless_required(kiln_testkit::REQUIRE_GPU, test, &reason);
        return None;
    }
    let p = discovery::probe().unwrap();
    // the kernel cache of the environment where there is one, so a machine compiles once
    let dir = tempfile::tempdir().unwrap();
    let cache = match std::env::var_os("KILN_CACHE_DIR") {
        Some(d) => KernelCache::new(std::path::Path::new(&d)),
        None => KernelCache::new(dir.path()),
    };
    Some((CudaBackend::new(&p.devices[0], cache, None).unwrap(), dir))
}

fn random(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 8.0 - 4.0
        })
        .collect()
}

/// The chain both ways replay: maps of several kinds, axpy, f16 storage, a device copy in
/// the middle (a non-kernel node between two programmatic kernels), each reading what the
/// one before wrote.
struct Chain {
    x: DeviceBuffer<f32>,
    y: DeviceBuffer<f32>,
    z: DeviceBuffer<f32>,
    h: DeviceBuffer<kiln_core::backend::f16>,
    g: DeviceBuffer<kiln_core::backend::f16>,
}

impl Chain {
    fn new(b: &CudaBackend, n: usize) -> Chain {
        let half = |v: f32| kiln_core::backend::f16::from_f32(v);
        Chain {
            x: b.upload(&random(n, 11)).unwrap(),
            y: b.alloc_poisoned(n).unwrap(),
            z: b.alloc_poisoned(n).unwrap(),
            h: b.upload_slice(&random(n, 12).into_iter().map(half).collect::<Vec<_>>())
                .unwrap(),
            g: b.alloc_poisoned_as(n).unwrap(),
        }
    }

    fn record(&mut self, b: &CudaBackend) -> kiln_core::Result<()> {
        let Chain { x, y, z, h, g } = self;
        for _ in 0..3 {
            b.run(Map {
                op: MapOp::Unary(UnaryOp::Sigmoid),
                x,
                out: y,
            })?;
            b.run(Map {
                op: MapOp::ScaleShift { a: 3.0, b: -1.5 },
                x: y,
                out: z,
            })?;
            b.run(Axpy { a: 0.25, x: z, y })?;
            b.copy_device_any(y, z)?;
            b.run(Map {
                op: MapOp::Unary(UnaryOp::Tanh),
                x: z,
                out: x,
            })?;
            b.run(Map {
                op: MapOp::Unary(UnaryOp::Sigmoid),
                x: h,
                out: g,
            })?;
            b.run(Map {
                op: MapOp::ScaleShift { a: 2.0, b: 0.5 },
                x: g,
                out: h,
            })?;
            b.run(Axpy { a: -0.5, x: g, y: h })?;
        }
        Ok(())
    }

    fn results(&self, b: &CudaBackend) -> (Vec<u32>, Vec<u16>) {
        let mut x = vec![0f32; self.x.len()];
        b.download(&self.x, &mut x).unwrap();
        let mut h = vec![kiln_core::backend::f16::ZERO; self.h.len()];
        self.h.copy_to_host(&mut h, b.main_stream()).unwrap();
        assert!(x.iter().all(|v| v.is_finite()), "unwritten or non-finite output");
        (
            x.iter().map(|v| v.to_bits()).collect(),
            h.iter().map(|v| v.to_bits()).collect(),
        )
    }
}

/// Eager, graph without PDL and graph with PDL (where the device has it), each replayed
/// three times from the same inputs: the same bits.
#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn a_chain_gives_the_same_bits_with_and_without_pdl() {
    let Some((b, _dir)) = backend_or_skip("a_chain_gives_the_same_bits_with_and_without_pdl") else {
        return;
    };
    let supported = b.pdl_supported();
    println!("pdl: {}", b.pdl_status());
    for n in [32, (1 << 20) + 3] {
        let mut want = Chain::new(&b, n);
        for _ in 0..3 {
            want.record(&b).unwrap();
        }
        let want = want.results(&b);
        for (pdl, device_launch) in [(false, false), (true, false), (false, true), (true, true)] {
            let mut c = Chain::new(&b, n);
            let opts = GraphOptions { pdl, device_launch };
            let g = match b.capture_with(opts, |b| c.record(b)) {
                Ok(g) => g,
                // device launch is an opt-in experiment: a driver may refuse to instantiate
                // a graph for it; that is reported, not a wrong result
                Err(e) if device_launch => {
                    println!("{opts:?}: not instantiated: {e}");
                    continue;
                }
                Err(e) => panic!("{opts:?}: {e}"),
            };
            assert_eq!(g.nodes(), 3 * 8);
            // of the 7 kernels a round, the first of the graph (no predecessor) and `tanh`
            // after the copy keep plain edges
            let expect = if pdl && supported { 3 * 7 - 1 - 3 } else { 0 };
            assert_eq!(g.programmatic_launches(), expect, "pdl {pdl}");
            for _ in 0..3 {
                g.launch().unwrap();
            }
            assert!(
                c.results(&b) == want,
                "n = {n}, {opts:?}: the graph's bits differ from eager"
            );
        }
    }
    assert_eq!(b.graph_options().pdl, supported);
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// 1000 tiny dependent kernels (x <- x + 1 on 32 floats, ping-pong between two buffers, as
/// `bench_engine` and peer_bench.py's `graphs`), one graph replay timed with CUDA events
/// (3 warm-ups, median of 21), each way; every replay's result checked exactly.
#[test]
#[ignore]
fn bench_graph_replay() {
    let Some((b, _dir)) = backend_or_skip("bench_graph_replay") else {
        return;
    };
    println!("pdl: {}", b.pdl_status());
    let op = MapOp::ScaleShift { a: 1.0, b: 1.0 };
    let mut x = b.upload(&[0f32; 32]).unwrap();
    let mut y = b.alloc::<f32>(32).unwrap();
    let mut done = 0usize;
    let work = |b: &CudaBackend, x: &mut DeviceBuffer<f32>, y: &mut DeviceBuffer<f32>| {
        for _ in 0..500 {
            b.run(Map { op, x, out: y })?;
            b.run(Map { op, x: y, out: x })?;
        }
        Ok(())
    };
    let eager = median(b.time_ms(3, 21, || work(&b, &mut x, &mut y)).unwrap());
    done += 24 * 1000;
    println!("BENCH {{\"workload\": \"launch_1000_tiny\", \"peer\": \"kiln-eager\", \"ms\": {eager:.4}, \"us_per_kernel\": {eager:.4}}}");
    for (name, pdl, device_launch) in [
        ("kiln-graph", false, false),
        ("kiln-graph-pdl", true, false),
        ("kiln-graph-device-launch", false, true),
        ("kiln-graph-pdl-device-launch", true, true),
    ] {
        let g = match b.capture_with(GraphOptions { pdl, device_launch }, |b| work(b, &mut x, &mut y)) {
            Ok(g) => g,
            Err(e) => {
                println!(
                    "BENCH {{\"workload\": \"launch_1000_tiny\", \"peer\": \"{name}\", \"error\": {:?}}}",
                    e.to_string()
                );
                continue;
            }
        };
        assert_eq!(g.nodes(), 1000);
        let ms = median(b.time_ms(3, 21, || g.launch()).unwrap());
        done += 24 * 1000;
        let mut got = vec![0f32; 32];
        b.download(&x, &mut got).unwrap();
        assert!(got.iter().all(|&v| v == done as f32), "{name}: {got:?} vs {done}");
        println!(
            "BENCH {{\"workload\": \"launch_1000_tiny\", \"peer\": \"{name}\", \"ms\": {ms:.4}, \"us_per_kernel\": {ms:.4}, \"programmatic\": {}, \"capture_ms\": {:.3}}}",
            g.programmatic_launches(),
            g.capture_ms()
        );
    }
}
