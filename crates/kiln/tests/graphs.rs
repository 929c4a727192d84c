//! CUDA graphs and the profiler on a real GPU: replay equals eager bit for bit on fresh
//! inputs, what cannot be captured is refused with a clear error and leaves the stream
//! usable, blocks a graph holds outlive their buffers, profiler ranges are timed per stream.
//! Skips (printing why) without a GPU; fails under KILN_REQUIRE_GPU=1.
#![allow(clippy::unwrap_used)] // helpers outside #[test] fns unwrap too

use kiln::device::ops::{Axpy, Map, MatMul};
use kiln::device::CudaBackend;
use kiln::{testing, Error};
use kiln_core::backend::MapOp;
use kiln_core::UnaryOp;

fn gpu(test: &str) -> Option<&'static CudaBackend> {
    testing::cuda_runtime_or_skip(test).map(|rt| rt.cuda().unwrap())
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// The sequence under test: sigmoid, then an affine map, then y += 0.25 x, on odd-sized
/// buffers, enqueued on the backend's stream (eagerly or into a capture).
fn sequence(
    b: &CudaBackend,
    x: &kiln::memory::DeviceBuffer<f32>,
    y: &mut kiln::memory::DeviceBuffer<f32>,
    z: &mut kiln::memory::DeviceBuffer<f32>,
) -> kiln::Result<()> {
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
    b.run(Axpy { a: 0.25, x, y: z })
}

#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn graph_replay_equals_eager_on_fresh_inputs() {
    let Some(b) = gpu("graph_replay_equals_eager") else {
        return;
    };
    for n in [1usize, 33, 100_003] {
        let mut x = b.alloc::<f32>(n).unwrap();
        let mut y = b.alloc::<f32>(n).unwrap();
        let mut z = b.alloc::<f32>(n).unwrap();
        let g = b.capture(|b| sequence(b, &x, &mut y, &mut z)).unwrap();
        assert_eq!(g.nodes(), 3, "{g:?}");
        assert_eq!(g.blocks(), 3);
        for rep in 0..3 {
            let input = testing::random_f32(n, -8.0, 8.0, testing::fresh_seed() ^ rep);
            // eager
            x.copy_from_host(&input, b.stream()).unwrap();
            sequence(b, &x, &mut y, &mut z).unwrap();
            let mut want = vec![0f32; n];
            z.copy_to_host(&mut want, b.stream()).unwrap();
            // replay on the same input, z poisoned first
            z.copy_from_host(&vec![f32::NAN; n], b.stream()).unwrap();
            g.write(&mut x, &input).unwrap();
            g.launch().unwrap();
            let mut got = vec![0f32; n];
            g.read(&z, &mut got).unwrap();
            assert_eq!(bits(&got), bits(&want), "n={n} rep={rep}");
        }
    }
}

#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn replays_are_ordered_like_eager_launches() {
    let Some(b) = gpu("replays_are_ordered") else {
        return;
    };
    let n = 4097;
    let x0 = testing::random_f32(n, -1.0, 1.0, testing::fresh_seed());
    let y0 = testing::random_f32(n, -1.0, 1.0, testing::fresh_seed());
    let x = b.upload(&x0).unwrap();
    let mut y = b.upload(&y0).unwrap();
    let g = b
        .capture(|b| {
            b.run(Axpy {
                a: 0.5,
                x: &x,
                y: &mut y,
            })
        })
        .unwrap();
    for _ in 0..5 {
        g.launch().unwrap();
    }
    let mut got = vec![0f32; n];
    g.read(&y, &mut got).unwrap();
    // eager reference: five dependent axpys
    let mut y2 = b.upload(&y0).unwrap();
    for _ in 0..5 {
        b.run(Axpy {
            a: 0.5,
            x: &x,
            y: &mut y2,
        })
        .unwrap();
    }
    let mut want = vec![0f32; n];
    b.download(&y2, &mut want).unwrap();
    assert_eq!(bits(&got), bits(&want));
}

fn assert_capture_error(r: kiln::Result<kiln_cuda::Graph>, what: &str) {
    match r {
        Err(Error::Capture { op, reason }) => {
            assert!(op.contains(what), "op {op:?} should name {what}");
            assert!(!reason.is_empty());
        }
        other => panic!("expected a capture error naming {what}, got {other:?}"),
    }
}

/// After a refused capture the stream must run eager work correctly.
fn stream_still_works(b: &CudaBackend) {
    let x0 = testing::random_f32(1000, -4.0, 4.0, testing::fresh_seed());
    let x = b.upload(&x0).unwrap();
    let mut y = b.alloc::<f32>(1000).unwrap();
    b.run(Map {
        op: MapOp::ScaleShift { a: 2.0, b: 0.0 },
        x: &x,
        out: &mut y,
    })
    .unwrap();
    let mut got = vec![0f32; 1000];
    b.download(&y, &mut got).unwrap();
    for (g, x) in got.iter().zip(&x0) {
        assert_eq!(*g, 2.0 * x);
    }
}

#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn what_cannot_be_captured_is_refused_and_the_stream_recovers() {
    let Some(b) = gpu("what_cannot_be_captured") else {
        return;
    };
    let host = vec![1f32; 256];
    // initialised: the capture that works at the end launches a kernel that reads x
    // (compute-sanitizer initcheck flagged the read when x was only allocated)
    let mut x = b.upload(&host).unwrap();
    let mut y = b.alloc::<f32>(256).unwrap();
    let mut out = vec![0f32; 256];
    // a host upload, a download, a wait, new device memory, a nested capture, nothing at all
    assert_capture_error(
        b.capture(|_| x.copy_from_host(&host, b.stream())),
        "copy_from_host",
    );
    stream_still_works(b);
    assert_capture_error(
        b.capture(|b| {
            b.run(Map {
                op: MapOp::Unary(UnaryOp::Relu),
                x: &x,
                out: &mut y,
            })?;
            y.copy_to_host(&mut out, b.stream())
        }),
        "copy_to_host",
    );
    stream_still_works(b);
    assert_capture_error(b.capture(|b| b.synchronize()), "synchronize");
    stream_still_works(b);
    let before = b.memory_stats();
    assert_capture_error(
        b.capture(|b| b.alloc::<f32>((3 << 30) / 4).map(drop)),
        "new device allocation",
    );
    assert_eq!(b.memory_stats().reserved_bytes, before.reserved_bytes);
    stream_still_works(b);
    assert_capture_error(b.capture(|b| b.capture(|_| Ok(())).map(drop)), "second capture");
    stream_still_works(b);
    assert_capture_error(b.capture(|_| Ok(())), "op sequence");
    stream_still_works(b);
    // and capture works again afterwards
    let g = b
        .capture(|b| {
            b.run(Map {
                op: MapOp::Unary(UnaryOp::Relu),
                x: &x,
                out: &mut y,
            })
        })
        .unwrap();
    g.launch().unwrap();
    b.synchronize().unwrap();
}

#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn blocks_a_graph_holds_outlive_their_buffers() {
    let Some(b) = gpu("blocks_a_graph_holds") else {
        return;
    };
    let n = 3 << 16; // 768 KiB: a small-pool block
    let x0 = testing::random_f32(n, -2.0, 2.0, testing::fresh_seed());
    let x = b.upload(&x0).unwrap();
    let mut out = b.alloc::<f32>(n).unwrap();
    let mut tmp = b.alloc::<f32>(n).unwrap();
    let tmp_ptr = tmp.device_ptr();
    let g = b
        .capture(|b| {
            b.run(Map {
                op: MapOp::ScaleShift { a: 2.0, b: 1.0 },
                x: &x,
                out: &mut tmp,
            })?;
            b.run(Map {
                op: MapOp::Unary(UnaryOp::Tanh),
                x: &tmp,
                out: &mut out,
            })
        })
        .unwrap();
    drop(tmp);
    // the block is still the graph's: a new buffer of the same size gets other memory
    let mut other = b.alloc::<f32>(n).unwrap();
    assert_ne!(other.device_ptr(), tmp_ptr);
    other.copy_from_host(&vec![7.0; n], b.stream()).unwrap();
    g.launch().unwrap();
    let mut got = vec![0f32; n];
    g.read(&out, &mut got).unwrap();
    let mut check = vec![0f32; n];
    other.copy_to_host(&mut check, b.stream()).unwrap();
    assert!(
        check.iter().all(|&v| v == 7.0),
        "a replay wrote into a reused block"
    );
    let want: Vec<f32> = x0.iter().map(|v| (2.0f32.mul_add(*v, 1.0)).tanh()).collect();
    for (g, w) in got.iter().zip(&want) {
        assert!((g - w).abs() <= 2e-6, "{g} vs {w}");
    }
    // once the graph is gone the block returns to the pool
    drop(g);
    drop(other);
    let again: Vec<_> = (0..4).map(|_| b.alloc::<f32>(n).unwrap()).collect();
    assert!(
        again.iter().any(|a| a.device_ptr() == tmp_ptr),
        "block not returned"
    );
}

#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn profiler_times_ranges_per_stream_and_skips_captures() {
    let Some(b) = gpu("profiler_times_ranges") else {
        return;
    };
    let p = kiln::profiler();
    let was = p.is_enabled();
    p.set_enabled(true);
    let n = 1 << 20;
    let x = b.upload(&testing::random_f32(n, -1.0, 1.0, 1)).unwrap();
    let mut y = b.alloc::<f32>(n).unwrap();
    let main = format!("cuda:{}/main", b.info().desc.ordinal);
    let before = p.report().get("map_f32", &main).map_or(0, |r| r.count);
    // (the profiler is process-wide and other tests run kernels in parallel: this test's
    // own ranges carry names nobody else uses)
    for _ in 0..10 {
        let _r = b.range("profiler-test-map");
        b.run(Map {
            op: MapOp::Unary(UnaryOp::Exp),
            x: &x,
            out: &mut y,
        })
        .unwrap();
    }
    {
        let _outer = b.range("ten-maps-and-a-capture");
        let g = b
            .capture(|b| {
                let _inside = b.range("profiler-test-inside-capture");
                b.run(Map {
                    op: MapOp::Unary(UnaryOp::Exp),
                    x: &x,
                    out: &mut y,
                })
            })
            .unwrap();
        g.launch().unwrap();
    }
    let rep = p.report();
    p.set_enabled(was);
    let mine = rep.get("profiler-test-map", &main).expect("own range row");
    assert_eq!(mine.count, 10, "{rep}");
    // 8 MB through the kernel: more than 1 us on any GPU kiln supports; the upper bound is
    // loose because under compute-sanitizer's racecheck one map takes tens of milliseconds
    assert!(mine.median_ms > 1e-3 && mine.median_ms < 1000.0, "{mine:?}");
    let row = rep.get("map_f32", &main).expect("map_f32 row");
    assert!(row.count - before >= 10, "{rep}");
    // a range inside a capture is not timed (it would be a graph node, not a timestamp)
    assert!(rep.get("profiler-test-inside-capture", &main).is_none(), "{rep}");
    let outer = rep.get("ten-maps-and-a-capture", &main).expect("outer");
    assert_eq!(outer.count, 1);
}

/// While one thread captures, another allocates new device memory and runs eager work on
/// the backend's stream: neither disturbs the other (the H200's first runs failed exactly
/// here when captures switched off growth pool-wide and recorded on the shared stream).
#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn other_threads_work_normally_during_a_capture() {
    let Some(b) = gpu("other_threads_during_capture") else {
        return;
    };
    let n = 1 << 16;
    let x0 = testing::random_f32(n, -3.0, 3.0, testing::fresh_seed());
    let x = b.upload(&x0).unwrap();
    let mut y = b.alloc::<f32>(n).unwrap();
    let inside = std::sync::Barrier::new(2);
    let done = std::sync::Barrier::new(2);
    std::thread::scope(|s| {
        s.spawn(|| {
            let g = b
                .capture(|b| {
                    b.run(Map {
                        op: MapOp::Unary(UnaryOp::Sigmoid),
                        x: &x,
                        out: &mut y,
                    })?;
                    inside.wait(); // the other thread works now, mid-capture
                    done.wait();
                    b.run(Map {
                        op: MapOp::ScaleShift { a: 2.0, b: 0.0 },
                        x: &x,
                        out: &mut y,
                    })
                })
                .unwrap();
            assert_eq!(g.nodes(), 2, "{g:?}");
            g.launch().unwrap();
            let mut got = vec![0f32; n];
            g.read(&y, &mut got).unwrap();
            assert!(got.iter().zip(&x0).all(|(g, x)| *g == 2.0 * x));
        });
        s.spawn(|| {
            inside.wait();
            // a size no cache holds: a new segment, on the main stream
            let big = b.upload(&vec![1.5f32; 40 << 18]).unwrap();
            let mut out = b.alloc::<f32>(big.len()).unwrap();
            b.run(Map {
                op: MapOp::ScaleShift { a: 2.0, b: 1.0 },
                x: &big,
                out: &mut out,
            })
            .unwrap();
            let mut host = vec![0f32; big.len()];
            b.download(&out, &mut host).unwrap();
            assert!(host.iter().all(|&v| v == 4.0));
            done.wait();
        });
    });
}

/// A GEMM captured after one has run (the cuBLAS handle and the main stream's workspace
/// exist: a capture cannot take new memory) replays the eager product's bits, and a GEMM on
/// a user stream in between, with that stream's own workspace, gives the same bits too.
#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn a_captured_gemm_replays_the_eager_bits() {
    use kiln::linalg::{Gemm, GemmImpl, GemmPrecision};
    let Some(b) = gpu("a_captured_gemm_replays_the_eager_bits") else {
        return;
    };
    let (m, n, k) = (96, 80, 1024);
    let g = Gemm::new(m, n, k);
    let (p, lib) = (GemmPrecision::F32, GemmImpl::Library);
    let mut a = b.alloc::<f32>(m * k).unwrap();
    let mut bb = b.alloc::<f32>(k * n).unwrap();
    let mut c = b.alloc::<f32>(m * n).unwrap();
    a.copy_from_host(
        &testing::random_f32(m * k, -1.0, 1.0, testing::fresh_seed()),
        b.stream(),
    )
    .unwrap();
    bb.copy_from_host(
        &testing::random_f32(k * n, -1.0, 1.0, testing::fresh_seed()),
        b.stream(),
    )
    .unwrap();
    b.run(MatMul {
        a: &a,
        b: &bb,
        c: &mut c,
        gemm: &g,
        precision: p,
        imp: lib,
    })
    .unwrap();
    let mut want = vec![0f32; m * n];
    c.copy_to_host(&mut want, b.stream()).unwrap();
    let graph = b
        .capture(|b| {
            b.run(MatMul {
                a: &a,
                b: &bb,
                c: &mut c,
                gemm: &g,
                precision: p,
                imp: lib,
            })
        })
        .unwrap();
    let slot = b.new_stream().unwrap();
    let mut c2 = b.alloc::<f32>(m * n).unwrap();
    b.with_stream(slot, || {
        b.run(MatMul {
            a: &a,
            b: &bb,
            c: &mut c2,
            gemm: &g,
            precision: p,
            imp: lib,
        })
    })
    .unwrap()
    .unwrap();
    c.copy_from_host(&vec![f32::NAN; m * n], b.stream()).unwrap();
    graph.launch().unwrap();
    let mut got = vec![0f32; m * n];
    graph.read(&c, &mut got).unwrap();
    assert_eq!(bits(&got), bits(&want), "replay");
    let mut other = vec![0f32; m * n];
    c2.copy_to_host(&mut other, b.user_stream(slot).unwrap()).unwrap();
    assert_eq!(bits(&other), bits(&want), "user stream");
}
