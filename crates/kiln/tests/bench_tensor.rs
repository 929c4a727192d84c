//! What a user waits for with device tensors, timed on the GPU machine (ignored by default:
//! `cargo test --release -p kiln --test bench_tensor -- --ignored --nocapture`):
//! - `rt.sigmoid` on a 2^28 f32 host `Vec` to a host `Vec` (the pipelined, staged path);
//! - the same through tensors: upload, sigmoid, download (`to_vec`);
//! - pinned host buffers both ways at once (`map_pipelined_pinned`);
//! - upload and download alone, pageable, in GB/s;
//! - a chain of three ops on a device tensor, against the same three host-slice calls.
//!   Each result is checked against the CPU before it is timed; medians of 5 runs after a
//!   warm-up. Prints one JSON line per row (`BENCH {...}`).
#![allow(clippy::unwrap_used)]

use kiln::imaging::FilterPath;
use kiln::memory::PipelineOptions;
use kiln::{testing, Runtime};
use kiln_core::backend::{MapOp, UnaryOp};
use kiln_core::imaging::{BoundaryMode, Kernel2D};
use std::time::Instant;

fn median_ms(reps: usize, mut f: impl FnMut()) -> f64 {
    f();
    let mut v: Vec<f64> = (0..reps)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn row(name: &str, ms: f64, bytes: f64, note: &str) {
    println!(
        "BENCH {{\"name\":\"{name}\",\"median_ms\":{ms:.3},\"gbps\":{:.2},\"note\":\"{note}\"}}",
        bytes / ms / 1e6
    );
}

#[test]
#[ignore = "benchmark: run on the GPU machine"]
fn host_to_host_paths() {
    let Some(rt) = testing::cuda_runtime_or_skip("bench_tensor::host_to_host_paths") else {
        return;
    };
    let dev = rt.cuda().unwrap();
    let n = 1usize << 28;
    let bytes = (n * 4) as f64;
    let x = testing::random_f32(n, -8.0, 8.0, 1);
    let cpu = Runtime::cpu();
    let want = cpu.sigmoid(&x).unwrap();
    let check = |got: &[f32], what: &str| {
        let max = got
            .iter()
            .zip(&want)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        assert!(max < 1e-6, "{what}: max |gpu - cpu| = {max}");
    };

    // 1. rt.sigmoid host Vec -> host Vec (allocates the output each call, as a user would)
    check(&rt.sigmoid(&x).unwrap(), "rt.sigmoid");
    let ms = median_ms(5, || {
        std::hint::black_box(rt.sigmoid(&x).unwrap());
    });
    row(
        "sigmoid_2^28_host_vec_to_host_vec",
        ms,
        bytes,
        "rt.sigmoid(&Vec) -> Vec: staged pipeline, pageable both ways, output allocated per call",
    );

    // 2. through tensors: upload, op, download
    let t_ms = median_ms(5, || {
        let t = rt.tensor(&x, &[n]).unwrap();
        std::hint::black_box(t.sigmoid().unwrap().to_vec::<f32>().unwrap());
    });
    check(
        &rt.tensor(&x, &[n])
            .unwrap()
            .sigmoid()
            .unwrap()
            .to_vec::<f32>()
            .unwrap(),
        "tensor",
    );
    row(
        "sigmoid_2^28_tensor_upload_op_to_vec",
        t_ms,
        bytes,
        "rt.tensor(&x) -> sigmoid -> to_vec: staged upload, then staged download",
    );

    // upload and download alone
    let up_ms = median_ms(5, || {
        let t = rt.tensor(&x, &[n]).unwrap();
        t.synchronize().unwrap();
    });
    row(
        "upload_1GiB_pageable",
        up_ms,
        bytes,
        "rt.tensor(&Vec): staged through pinned buffers, synchronized",
    );
    let t = rt.tensor(&x, &[n]).unwrap();
    let mut out = vec![0.0f32; n];
    let down_ms = median_ms(5, || t.to_host_into(&mut out).unwrap());
    row(
        "download_1GiB_pageable_into_existing",
        down_ms,
        bytes,
        "to_host_into an existing Vec",
    );
    let down2_ms = median_ms(5, || {
        std::hint::black_box(t.to_vec::<f32>().unwrap());
    });
    row(
        "download_1GiB_pageable_to_new_vec",
        down2_ms,
        bytes,
        "to_vec (a new Vec each call)",
    );

    // 3. pinned both ways at once
    let mut px = dev.pinned_pool().alloc::<f32>(n).unwrap();
    px.copy_from_slice(&x);
    let mut py = dev.pinned_pool().alloc::<f32>(n).unwrap();
    let op = MapOp::Unary(UnaryOp::Sigmoid);
    dev.map_pipelined_pinned(op, &px, &mut py, PipelineOptions::default())
        .unwrap();
    check(&py, "pinned pipeline");
    let p_ms = median_ms(5, || {
        dev.map_pipelined_pinned(op, &px, &mut py, PipelineOptions::default())
            .unwrap();
    });
    row(
        "sigmoid_2^28_pinned_both_ways",
        p_ms,
        bytes,
        "pinned host buffers, chunked over 3 streams, both directions at once",
    );
    // the same through the facade, and a pinned tensor (upload without staging, op, download)
    let f_ms = median_ms(5, || rt.map_pinned(op, &px, &mut py).unwrap());
    row(
        "sigmoid_2^28_rt_map_pinned",
        f_ms,
        bytes,
        "rt.map_pinned: the facade's pinned-to-pinned map",
    );
    let px = std::sync::Arc::new(px);
    let pt_ms = median_ms(5, || {
        let t = rt.tensor_from_pinned(px.clone(), &[n]).unwrap();
        t.sigmoid().unwrap().to_host_into(&mut py).unwrap();
    });
    check(&py, "pinned tensor");
    row(
        "sigmoid_2^28_pinned_tensor_then_to_host_into",
        pt_ms,
        bytes,
        "tensor_from_pinned (DMA, no staging) -> sigmoid -> to_host_into(pinned): upload then download",
    );
    drop((px, py));

    // 4. a chain of three ops: on a device tensor vs three host-slice calls
    let (h, w) = (8192, 8192);
    let img = testing::random_f32(h * w, -1.0, 1.0, 2);
    let k = Kernel2D::preset("gaussian:2").unwrap();
    let mode = BoundaryMode::Reflect;
    let chain_t = median_ms(5, || {
        let t = rt.tensor(&img, &[h, w]).unwrap();
        let y = t
            .filter2d(&k, mode, FilterPath::Auto)
            .unwrap()
            .clamp(-0.5, 0.5)
            .unwrap()
            .transpose()
            .unwrap();
        std::hint::black_box(y.to_vec::<f32>().unwrap());
    });
    let chain_h = median_ms(5, || {
        let f = rt.filter2d(&img, [h, w], &k, mode, FilterPath::Auto).unwrap();
        let c = rt.clamp(-0.5, 0.5, &f).unwrap();
        std::hint::black_box(rt.transpose(&c, h, w).unwrap());
    });
    row(
        "chain_8192^2_gaussian_clamp_transpose_tensor",
        chain_t,
        (h * w * 4) as f64,
        "one upload, three ops on the device, one download",
    );
    row(
        "chain_8192^2_gaussian_clamp_transpose_host_slices",
        chain_h,
        (h * w * 4) as f64,
        "three host-slice calls: each uploads and downloads",
    );

    // 5. in process, context up: an 8192^2 f32 .npy -> gaussian sigma 2 -> .npy through the
    //    facade (peer: peer_bench.py's gaussian2_npy_file_to_file, cupyx)
    let dir = tempfile::tempdir().unwrap();
    let (src, dst) = (dir.path().join("big.npy"), dir.path().join("out.npy"));
    let arr = ndarray::Array2::from_shape_vec((h, w), img.clone()).unwrap();
    kiln_io::write_npy(&src, &arr).unwrap();
    // each run's stages (read, device: upload + filter + download, write), in ms
    let stages = std::cell::RefCell::new(Vec::<[f64; 3]>::new());
    let run = || {
        let t = Instant::now();
        let a = kiln_io::read_npy(&src).unwrap();
        let shape = a.data.shape().to_vec();
        let t_read = t.elapsed().as_secs_f64() * 1e3;
        let y = rt
            .tensor(a.data.as_slice().unwrap(), &shape)
            .unwrap()
            .filter2d(&k, mode, FilterPath::Auto)
            .unwrap();
        let mut out = kiln::memory::host_vec::<f32>(y.len());
        y.to_host_into(&mut out).unwrap();
        let t_dev = t.elapsed().as_secs_f64() * 1e3;
        let o = ndarray::ArrayD::from_shape_vec(shape, out).unwrap();
        kiln_io::write_npy(&dst, &o).unwrap();
        let t_all = t.elapsed().as_secs_f64() * 1e3;
        stages.borrow_mut().push([t_read, t_dev - t_read, t_all - t_dev]);
    };
    let stage_note = |v: &[[f64; 3]]| {
        let med = |i: usize| {
            let mut x: Vec<f64> = v.iter().map(|s| s[i]).collect();
            x.sort_by(f64::total_cmp);
            x[x.len() / 2]
        };
        format!(
            "stages (median ms): read {:.1}, upload+filter+download {:.1}, write {:.1}",
            med(0),
            med(1),
            med(2)
        )
    };
    let file_ms = median_ms(3, run);
    let stage_note = stage_note(&stages.borrow()[1..]);
    let back = kiln_io::read_npy(&dst).unwrap();
    let want = rt.filter2d(&img, [h, w], &k, mode, FilterPath::Auto).unwrap();
    assert_eq!(back.data.as_slice().unwrap(), &want[..]);
    row(
        "gaussian2_npy_file_to_file_in_process",
        file_ms,
        (h * w * 4) as f64,
        &format!(
            "kiln_io::read_npy -> tensor -> filter2d -> to_host_into -> write_npy (atomic), context up; {stage_note}"
        ),
    );
}

/// What a fresh process pays the first time it moves a 256 MiB f32 `Vec` up and down (the
/// CLI's one-file filter: read into a `Vec` before the runtime is up), staged against
/// page-locked in place. Run it alone so the process is fresh:
/// `bench_tensor --ignored --nocapture first_use_transfers`.
#[test]
#[ignore = "benchmark: run on the GPU machine, alone"]
fn first_use_transfers() {
    let t0 = Instant::now();
    let Some(rt) = testing::cuda_runtime_or_skip("bench_tensor::first_use_transfers") else {
        return;
    };
    let ms = |t: Instant| t.elapsed().as_secs_f64() * 1e3;
    let dev = rt.cuda().unwrap();
    let n = 1usize << 26;
    let bytes = (n * 4) as f64;
    println!("FIRST runtime {:.1} ms", ms(t0));
    let mut x = kiln::memory::host_vec::<f32>(n);
    x.iter_mut().enumerate().for_each(|(i, v)| *v = (i % 1013) as f32);
    let want = x.clone();
    let stats = || {
        let p = dev.pinned_pool().stats();
        format!(
            "pinned allocs {} ({:.1} ms in cuMemHostAlloc, {:.1} ms zero-filling)",
            p.num_host_allocs,
            p.host_alloc_ns as f64 / 1e6,
            p.zero_fill_ns as f64 / 1e6
        )
    };
    // staged, first and second time each way
    let mut t = None;
    for i in 1..=2 {
        let s = Instant::now();
        let d = rt.tensor(&x, &[n]).unwrap();
        d.synchronize().unwrap();
        row(
            &format!("first_use_upload_256MiB_staged_{i}"),
            ms(s),
            bytes,
            &stats(),
        );
        t = Some(d);
    }
    let t = t.unwrap();
    let mut back = kiln::memory::host_vec::<f32>(n);
    for i in 1..=2 {
        let s = Instant::now();
        t.to_host_into(&mut back).unwrap();
        row(
            &format!("first_use_download_256MiB_staged_{i}"),
            ms(s),
            bytes,
            &stats(),
        );
    }
    assert_eq!(back, want);
    // page-locked in place: register, one DMA up, one down into the same Vec, unregister
    for i in 1..=2 {
        let v = std::mem::take(&mut x);
        let s = Instant::now();
        let mut r = dev.register_vec(v).map_err(|(_, e)| e).unwrap();
        let reg = ms(s);
        let s = Instant::now();
        let d = rt.tensor(&r, &[n]).unwrap();
        d.synchronize().unwrap();
        let up = ms(s);
        r.iter_mut().for_each(|v| *v = -1.0);
        let s = Instant::now();
        d.to_host_into(&mut r).unwrap();
        let down = ms(s);
        let s = Instant::now();
        x = r.into_vec();
        let unreg = ms(s);
        assert_eq!(x, want);
        row(
            &format!("first_use_registered_256MiB_{i}"),
            reg + up + down + unreg,
            2.0 * bytes,
            &format!("register {reg:.1} ms, upload {up:.1}, download {down:.1}, unregister {unreg:.1}"),
        );
    }
}
