//! Users' raw CUDA kernels through the facade: results checked against the CPU, ordering
//! with kiln's ops and streams, graph capture, the compile cache across backends, and a
//! typed error (never a panic) for every bad launch. The GPU tests skip (printing why)
//! without a GPU and fail instead under KILN_REQUIRE_GPU=1.
#![allow(clippy::unwrap_used)] // helpers outside #[test] fns unwrap too

use kiln::core::backend::f16;
use kiln::{testing, Arg, Config, DeviceRequest, Error, Runtime};

const SAXPY: &str = r#"
// y = a x + y over n elements, one per thread
extern "C" __global__ void saxpy(const float* __restrict__ x, float* __restrict__ y, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
"#;

const AFFINE2D: &str = r#"
    extern "C" __global__ void affine2d(const float* in, float* out, int w, int h) {
        int x = blockIdx.x * blockDim.x + threadIdx.x;
        int y = blockIdx.y * blockDim.y + threadIdx.y;
        if (x < w && y < h) out[y * w + x] = 2.0f * in[y * w + x] + (float)x - 3.0f * (float)y;
    }"#;

const TYPED: &str = r#"
    typedef unsigned short __half;
    __device__ float h2f(__half h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
    __device__ __half f2h(float f) { __half h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
    extern "C" __global__ void scale_h(const __half* x, __half* y, __half a, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) y[i] = f2h(h2f(x[i]) * h2f(a));
    }
    extern "C" __global__ void fma_d(const double* x, double* y, double a, long long n) {
        long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
        if (i < n) y[i] = fma(a, x[i], y[i]);
    }
    extern "C" __global__ void mix_u(const unsigned char* x, unsigned short* y, unsigned mul, int add, unsigned n) {
        unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) y[i] = (unsigned short)(x[i] * mul + add);
    }"#;

const TWO_FNS: &str = r#"
    extern "C" {
    __global__ void fill(float* y, float v, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) y[i] = v + N;
    }
    __global__ void square(float* y, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) y[i] = y[i] * y[i];
    }
    }"#;

const MACRO_REAL: &str = r#"
    #define REAL float
    extern "C" __global__ void twice(REAL* y, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) y[i] *= 2;
    }"#;

const OOB: &str =
    r#"extern "C" __global__ void oob(float* y) { y[((long long)1 << 40) + threadIdx.x] = 1.0f; }"#;

fn gpu(test: &str) -> Option<&'static Runtime> {
    testing::cuda_runtime_or_skip(test)
}

fn blocks(n: usize, threads: u32) -> u32 {
    n.div_ceil(threads as usize) as u32
}

fn invalid(r: kiln::Result<()>, words: &[&str]) {
    match r {
        Err(e @ Error::InvalidArgument { .. }) => {
            let s = e.to_string();
            for w in words {
                assert!(s.contains(w), "`{w}` not in: {s}");
            }
        }
        other => panic!("expected InvalidArgument naming {words:?}, got {other:?}"),
    }
}

/// Every source the GPU tests launch compiles for sm_90 and reads as the tests expect
/// (needs only libnvrtc, so it runs without a GPU).
#[test]
fn every_source_here_compiles_and_reads_as_expected() {
    use kiln::kernels::UserSource;
    if !kiln::device::nvrtc_available() {
        testing::skip_unless_required(
            "KILN_REQUIRE_NVRTC",
            "every_source_here_compiles",
            "libnvrtc cannot be loaded",
        );
        return;
    }
    let two = ["-DN=1.0f".to_string()];
    for (src, opts) in [
        (SAXPY, &[][..]),
        (AFFINE2D, &[]),
        (BLOCK_SUM, &[]),
        (TYPED, &[]),
        (TWO_FNS, &two[..]),
        (MACRO_REAL, &[]),
        (OOB, &[]),
    ] {
        let u = UserSource::new(src, opts).unwrap();
        if let Err(e) = u.compile("sm_90") {
            panic!("{}: {e}", u.name());
        }
    }
    let k = kiln::kernels::signature::kernels(TYPED);
    let scale_h = k["scale_h"].as_ref().unwrap();
    let tys: Vec<_> = scale_h.params.iter().map(|p| p.ty).collect();
    use kiln::kernels::{ParamType as P, ScalarType as S};
    assert_eq!(
        tys,
        vec![
            P::Pointer(Some(S::F16)),
            P::Pointer(Some(S::F16)),
            P::Scalar(S::F16),
            P::Scalar(S::I32)
        ]
    );
    assert!(kiln::kernels::signature::kernels(MACRO_REAL)["twice"].is_err());
}

#[test]
fn raw_kernels_can_be_shared_across_threads() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<kiln::RawKernel>();
    send_sync::<kiln::RawModule>();
}

#[test]
fn a_cpu_runtime_says_raw_kernels_need_a_gpu() {
    let e = Runtime::cpu().raw_kernel(SAXPY, "saxpy", &[]).unwrap_err();
    assert!(e.to_string().contains("raw CUDA kernels need a GPU"), "{e}");
}

#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn saxpy_f32_matches_the_cpu_at_odd_sizes() {
    let Some(rt) = gpu("saxpy_f32_matches_the_cpu_at_odd_sizes") else {
        return;
    };
    let k = rt.raw_kernel(SAXPY, "saxpy", &[]).unwrap();
    let p = kiln::profiler();
    let was = p.is_enabled();
    p.set_enabled(true);
    for (i, n) in [1usize, 3, 255, 257, 1000, 65537, (1 << 20) + 3]
        .into_iter()
        .enumerate()
    {
        let x = testing::random_f32(n, -2.0, 2.0, 10 + i as u64);
        let y0 = testing::random_f32(n, -2.0, 2.0, 100 + i as u64);
        let (tx, ty) = (rt.tensor(&x, &[n]).unwrap(), rt.tensor(&y0, &[n]).unwrap());
        k.launch(
            (blocks(n, 256), 1, 1),
            (256, 1, 1),
            0,
            &[Arg::from(&tx), Arg::from(&ty), 1.5f32.into(), (n as i32).into()],
        )
        .unwrap();
        let got = ty.to_vec::<f32>().unwrap();
        for j in 0..n {
            // one rounding of a*x, one of the sum, or one fused multiply-add
            let want = 1.5f64 * x[j] as f64 + y0[j] as f64;
            assert!(
                (got[j] as f64 - want).abs() <= 4.0 * f32::EPSILON as f64 * want.abs().max(1.0),
                "n={n} j={j}: {} vs {want}",
                got[j]
            );
        }
    }
    let rep = p.report();
    p.set_enabled(was);
    let main = format!("cuda:{}/main", rt.cuda().unwrap().info().desc.ordinal);
    assert!(
        rep.get("user:saxpy", &main).is_some_and(|r| r.count >= 7),
        "{rep}"
    );
}

#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn a_2d_grid_kernel_covers_every_element() {
    let Some(rt) = gpu("a_2d_grid_kernel_covers_every_element") else {
        return;
    };
    let src = AFFINE2D;
    let k = rt.raw_kernel(src, "affine2d", &[]).unwrap();
    let (w, h) = (131usize, 77usize);
    let input = testing::random_f32(w * h, -1.0, 1.0, 7);
    let tin = rt.tensor(&input, &[h, w]).unwrap();
    let out = rt.tensor(&vec![f32::NAN; w * h], &[h, w]).unwrap(); // poisoned
    let grid = (blocks(w, 16), blocks(h, 8), 1);
    k.launch(
        grid,
        (16, 8, 1),
        0,
        &[
            Arg::from(&tin),
            Arg::from(&out),
            (w as i32).into(),
            (h as i32).into(),
        ],
    )
    .unwrap();
    let got = out.to_vec::<f32>().unwrap();
    for y in 0..h {
        for x in 0..w {
            let want = 2.0 * input[y * w + x] + x as f32 - 3.0 * y as f32;
            assert_eq!(got[y * w + x], want, "({x}, {y})");
        }
    }
}

const BLOCK_SUM: &str = r#"
// Each block sums its blockDim.x elements in dynamic shared memory; the values are staged at
// the far end of a buffer of `smem_floats`, so a launch above 48 KiB uses all of it.
extern "C" __global__ void block_sum(const float* x, float* partial, int n, int smem_floats) {
    extern __shared__ float s[];
    float* t = s + (smem_floats - blockDim.x);
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    t[threadIdx.x] = i < n ? x[i] : 0.0f;
    __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) t[threadIdx.x] += t[threadIdx.x + k];
        __syncthreads();
    }
    if (threadIdx.x == 0) partial[blockIdx.x] = t[0];
}"#;

#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn dynamic_shared_memory_block_reduction_below_and_above_48k() {
    let Some(rt) = gpu("dynamic_shared_memory_block_reduction") else {
        return;
    };
    let k = rt.raw_kernel(BLOCK_SUM, "block_sum", &[]).unwrap();
    let n = 100_003usize;
    let x = testing::random_f32(n, 0.0, 1.0, 3);
    let tx = rt.tensor(&x, &[n]).unwrap();
    let threads = 256u32;
    let nb = blocks(n, threads) as usize;
    for smem_floats in [threads, 24 * 1024] {
        // 1 KiB, then 96 KiB (the kernel opts in to more than 48 KiB first)
        let partial = rt.tensor(&vec![f32::NAN; nb], &[nb]).unwrap();
        k.launch(
            (nb as u32, 1, 1),
            (threads, 1, 1),
            smem_floats * 4,
            &[
                Arg::from(&tx),
                Arg::from(&partial),
                (n as i32).into(),
                (smem_floats as i32).into(),
            ],
        )
        .unwrap();
        let got = partial.to_vec::<f32>().unwrap();
        for (b, g) in got.iter().enumerate() {
            let want: f64 = x[b * threads as usize..((b + 1) * threads as usize).min(n)]
                .iter()
                .map(|&v| v as f64)
                .sum();
            assert!(
                (*g as f64 - want).abs() < 1e-4 * want.max(1.0),
                "smem {smem_floats}: block {b}: {g} vs {want}"
            );
        }
    }
    // more than any block can have is refused before launch, naming the limit
    invalid(
        k.launch(
            (1, 1, 1),
            (threads, 1, 1),
            4 << 20,
            &[Arg::from(&tx), Arg::from(&tx), 1i32.into(), 1i32.into()],
        ),
        &["shared memory", "block_sum"],
    );
}

#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn f16_f64_and_integer_kernels() {
    let Some(rt) = gpu("f16_f64_and_integer_kernels") else {
        return;
    };
    // kiln passes NVRTC no CUDA include path (pass -I.../include for cuda_fp16.h): this
    // source spells a half as its bits and converts with PTX, as kiln's own kernels do
    let src = TYPED;
    let m = rt.raw_module(src, &[]).unwrap();
    assert_eq!(m.kernels(), vec!["fma_d", "mix_u", "scale_h"]);
    let n = 4099usize;
    // f16: a product of halves, rounded once, as the CPU's f32 product rounded to f16
    let xh: Vec<f16> = testing::random_f32(n, -4.0, 4.0, 1)
        .into_iter()
        .map(f16::from_f32)
        .collect();
    let (tx, ty) = (
        rt.tensor(&xh, &[n]).unwrap(),
        rt.tensor(&vec![f16::NAN; n], &[n]).unwrap(),
    );
    m.function("scale_h")
        .unwrap()
        .launch(
            (blocks(n, 128), 1, 1),
            (128, 1, 1),
            0,
            &[
                Arg::from(&tx),
                Arg::from(&ty),
                f16::from_f32(0.75).into(),
                (n as i32).into(),
            ],
        )
        .unwrap();
    let want: Vec<f16> = xh.iter().map(|h| f16::from_f32(h.to_f32() * 0.75)).collect();
    assert_eq!(ty.to_vec::<f16>().unwrap(), want);
    // f64: fused multiply-add, bit for bit the CPU's
    let xd: Vec<f64> = (0..n).map(|i| (i as f64).sin()).collect();
    let yd: Vec<f64> = (0..n).map(|i| (i as f64 * 0.37).cos()).collect();
    let (tx, ty) = (rt.tensor(&xd, &[n]).unwrap(), rt.tensor(&yd, &[n]).unwrap());
    m.function("fma_d")
        .unwrap()
        .launch(
            (blocks(n, 256), 1, 1),
            (256, 1, 1),
            0,
            &[Arg::from(&tx), Arg::from(&ty), 0.1f64.into(), (n as i64).into()],
        )
        .unwrap();
    let want: Vec<f64> = xd.iter().zip(&yd).map(|(x, y)| 0.1f64.mul_add(*x, *y)).collect();
    assert_eq!(ty.to_vec::<f64>().unwrap(), want);
    // integers: u8 in, u16 out, wrapping like C
    let xu: Vec<u8> = (0..n).map(|i| (i * 7 % 256) as u8).collect();
    let (tx, ty) = (
        rt.tensor(&xu, &[n]).unwrap(),
        rt.tensor(&vec![0u16; n], &[n]).unwrap(),
    );
    m.function("mix_u")
        .unwrap()
        .launch(
            (blocks(n, 256), 1, 1),
            (256, 1, 1),
            0,
            &[
                Arg::from(&tx),
                Arg::from(&ty),
                300u32.into(),
                (-5i32).into(),
                (n as u32).into(),
            ],
        )
        .unwrap();
    let want: Vec<u16> = xu
        .iter()
        .map(|&v| (v as u32 * 300).wrapping_add(-5i32 as u32) as u16)
        .collect();
    assert_eq!(ty.to_vec::<u16>().unwrap(), want);
}

#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn a_module_with_two_functions() {
    let Some(rt) = gpu("a_module_with_two_functions") else {
        return;
    };
    let src = TWO_FNS;
    let m = rt.raw_module(src, &["-DN=1.0f".to_string()]).unwrap();
    let n = 777usize;
    let y = rt.tensor(&vec![f32::NAN; n], &[n]).unwrap();
    m.function("fill")
        .unwrap()
        .launch(
            (4, 1, 1),
            (256, 1, 1),
            0,
            &[Arg::from(&y), 2.0f32.into(), (n as i32).into()],
        )
        .unwrap();
    m.function("square")
        .unwrap()
        .launch((4, 1, 1), (256, 1, 1), 0, &[Arg::from(&y), (n as i32).into()])
        .unwrap();
    assert_eq!(y.to_vec::<f32>().unwrap(), vec![9.0f32; n]);
    invalid(
        m.function("cube").map(drop),
        &["no kernel `cube`", "fill, square", "extern \"C\""],
    );
    invalid(m.function("fi\0ll").map(drop), &["NUL"]);
}

/// A runtime on `cache_dir` that loads `src`'s `saxpy` and checks it runs.
fn saxpy_from(cache_dir: &std::path::Path, src: &str) -> Runtime {
    let mut cfg = Config::load(None).unwrap();
    cfg.cache_dir = cache_dir.to_path_buf();
    let rt = Runtime::new(DeviceRequest::Cuda(None), &cfg).unwrap();
    let k = rt.raw_kernel(src, "saxpy", &[]).unwrap();
    let n = 10usize;
    let (x, y) = (
        rt.tensor(&vec![1.0f32; n], &[n]).unwrap(),
        rt.tensor(&vec![1.0f32; n], &[n]).unwrap(),
    );
    k.launch(
        (1, 1, 1),
        (32, 1, 1),
        0,
        &[Arg::from(&x), Arg::from(&y), 2.0f32.into(), (n as i32).into()],
    )
    .unwrap();
    assert_eq!(y.to_vec::<f32>().unwrap(), vec![3.0f32; n]);
    rt
}

/// The child half of the next test: a process of its own, so NVRTC's compile count is this
/// load's alone.
#[test]
#[ignore = "the child process of a_second_backend_and_a_second_process_compile_nothing"]
fn raw_cache_child() {
    let (Ok(dir), Ok(src)) = (
        std::env::var("KILN_RAW_CACHE_DIR"),
        std::env::var("KILN_RAW_CACHE_SRC"),
    ) else {
        return;
    };
    let before = kiln::device::nvrtc_compiles_this_process();
    let _rt = saxpy_from(std::path::Path::new(&dir), &src);
    println!(
        "RAW_CACHE_CHILD compiles={}",
        kiln::device::nvrtc_compiles_this_process() - before
    );
}

#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn a_second_backend_and_a_second_process_compile_nothing() {
    if !testing::gpu_or_skip("a_second_backend_and_a_second_process_compile_nothing") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // a source no other run has compiled, so the first load must compile it
    let src = format!("// {}\n{SAXPY}", testing::fresh_seed());
    let c0 = kiln::device::nvrtc_compiles_this_process();
    let first = saxpy_from(dir.path(), &src);
    assert!(
        kiln::device::nvrtc_compiles_this_process() > c0,
        "the first load compiles"
    );
    // the same source again on the same backend: the module it already loaded
    let loads = first.cuda().unwrap().module_loads().len();
    first.raw_kernel(&src, "saxpy", &[]).unwrap();
    assert_eq!(first.cuda().unwrap().module_loads().len(), loads);
    drop(first);
    // a fresh backend in this process loads the cubin from disk (other tests of this binary
    // compile their own sources meanwhile, so the cache event, not the count, says so here)
    let fresh = saxpy_from(dir.path(), &src);
    let loads = fresh.cuda().unwrap().module_loads();
    assert!(
        loads
            .iter()
            .any(|l| l.cache.program == "user_saxpy" && l.cache.outcome == kiln::kernels::Outcome::Hit),
        "{loads:?}"
    );
    drop(fresh);
    let cubins = std::fs::read_dir(dir.path())
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "cubin")
        })
        .count();
    assert_eq!(cubins, 1);
    // and a second process compiles nothing at all
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "raw_cache_child",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("KILN_RAW_CACHE_DIR", dir.path())
        .env("KILN_RAW_CACHE_SRC", &src)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("RAW_CACHE_CHILD compiles=0"),
        "child said: {text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn ordered_with_kiln_ops_before_and_after_and_across_streams() {
    let Some(rt) = gpu("ordered_with_kiln_ops") else {
        return;
    };
    let k = rt.raw_kernel(SAXPY, "saxpy", &[]).unwrap();
    let n = (1 << 22) + 5; // long enough that a missing dependency would show
    let x = testing::random_f32(n, -3.0, 3.0, 21);
    let tx = rt.tensor(&x, &[n]).unwrap();
    let cpu = Runtime::cpu();
    let cx = cpu.tensor(&x, &[n]).unwrap();
    // kiln op -> raw kernel (in place on its result) -> kiln op, all queued, one read
    let s = tx.sigmoid().unwrap();
    k.launch(
        (blocks(n, 256), 1, 1),
        (256, 1, 1),
        0,
        &[Arg::from(&tx), Arg::from(&s), 2.0f32.into(), (n as i32).into()],
    )
    .unwrap();
    let out = s.scale_shift(0.5, -1.0).unwrap().to_vec::<f32>().unwrap();
    let cs = cx.sigmoid().unwrap().to_vec::<f32>().unwrap();
    let want: Vec<f64> = cs
        .iter()
        .zip(&x)
        .map(|(s, x)| 0.5 * (2.0 * *x as f64 + *s as f64) - 1.0)
        .collect();
    let err = kiln::verify::rel_l2(&out, &want);
    assert!(err < 1e-6, "rel L2 {err:e}");
    // the raw kernel on another stream writes a tensor made on the main stream: a host read
    // and a kiln op on the main stream both see the write
    let y = tx.scale_shift(1.0, 0.0).unwrap();
    let other = rt.stream().unwrap();
    rt.with_stream(&other, || {
        k.launch(
            (blocks(n, 256), 1, 1),
            (256, 1, 1),
            0,
            &[Arg::from(&tx), Arg::from(&y), 1.0f32.into(), (n as i32).into()],
        )
    })
    .unwrap()
    .unwrap();
    let after = y.scale_shift(1.0, 1.0).unwrap().to_vec::<f32>().unwrap();
    let direct = y.to_vec::<f32>().unwrap();
    for j in (0..n).step_by(997).chain([n - 1]) {
        assert_eq!(direct[j], x[j] + x[j], "{j}");
        assert_eq!(after[j], direct[j] + 1.0, "{j}");
    }
}

#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn captured_into_a_graph_and_replayed() {
    let Some(rt) = gpu("captured_into_a_graph_and_replayed") else {
        return;
    };
    let b = rt.cuda().unwrap();
    let k = rt.raw_kernel(SAXPY, "saxpy", &[]).unwrap();
    let n = 10_001usize;
    let x = testing::random_f32(n, -1.0, 1.0, 5);
    let (tx, ty) = (
        rt.tensor(&x, &[n]).unwrap(),
        rt.tensor(&vec![1.0f32; n], &[n]).unwrap(),
    );
    tx.synchronize().unwrap();
    let g = b
        .capture(|_| {
            k.launch(
                (blocks(n, 256), 1, 1),
                (256, 1, 1),
                0,
                &[Arg::from(&tx), Arg::from(&ty), 0.5f32.into(), (n as i32).into()],
            )
        })
        .unwrap();
    // the capture recorded, it ran nothing
    assert_eq!(ty.to_vec::<f32>().unwrap(), vec![1.0f32; n]);
    assert!(g.nodes() >= 1);
    g.launch().unwrap();
    g.launch().unwrap();
    let got = ty.to_vec::<f32>().unwrap();
    for j in 0..n {
        let once = 0.5f32.mul_add(x[j], 1.0);
        let twice_fma = 0.5f32.mul_add(x[j], once);
        let twice = 0.5 * x[j] + (0.5 * x[j] + 1.0);
        assert!(
            got[j] == twice_fma || got[j] == twice,
            "{j}: {} vs {twice_fma}",
            got[j]
        );
    }
}

#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn every_bad_launch_is_a_typed_error() {
    let Some(rt) = gpu("every_bad_launch_is_a_typed_error") else {
        return;
    };
    let k = rt.raw_kernel(SAXPY, "saxpy", &[]).unwrap();
    let n = 64usize;
    let (x, y) = (
        rt.tensor(&vec![1.0f32; n], &[n]).unwrap(),
        rt.tensor(&vec![1.0f32; n], &[n]).unwrap(),
    );
    let xd = rt.tensor(&vec![1.0f64; n], &[n]).unwrap();
    let on_cpu = Runtime::cpu().tensor(&vec![1.0f32; n], &[n]).unwrap();
    let ni = n as i32;
    let launch = |args: &[Arg]| k.launch((1, 1, 1), (64, 1, 1), 0, args);
    invalid(
        launch(&[Arg::from(&x), Arg::from(&y), 1.0f32.into()]),
        &["takes 4 arguments", "got 3"],
    );
    invalid(
        launch(&[Arg::from(&xd), Arg::from(&y), 1.0f32.into(), ni.into()]),
        &["argument 1", "f32", "f64"],
    );
    invalid(
        launch(&[Arg::from(&x), Arg::from(&y), 1.0f32.into(), 64.0f32.into()]),
        &["argument 4", "integer"],
    );
    invalid(
        launch(&[Arg::from(&x), Arg::from(&y), 0.1f64.into(), ni.into()]),
        &["argument 3", "not exactly representable"],
    );
    invalid(
        launch(&[Arg::from(&x), 1.0f32.into(), 1.0f32.into(), ni.into()]),
        &["argument 2", "buffer"],
    );
    invalid(
        launch(&[Arg::from(&on_cpu), Arg::from(&y), 1.0f32.into(), ni.into()]),
        &["argument 1", "cpu", "to_device"],
    );
    let good = [Arg::from(&x), Arg::from(&y), 1.0f32.into(), ni.into()];
    invalid(
        k.launch((1, 1, 1), (2048, 1, 1), 0, &good),
        &["2048 threads", "at most"],
    );
    invalid(k.launch((1, 1, 1), (1, 1, 128), 0, &good), &["block z"]);
    invalid(k.launch((0, 1, 1), (64, 1, 1), 0, &good), &["at least 1"]);
    invalid(k.launch((1, 70000, 1), (64, 1, 1), 0, &good), &["grid y"]);
    // nothing was launched by any of them, and the runtime still works
    k.launch((1, 1, 1), (64, 1, 1), 0, &good).unwrap();
    assert_eq!(y.to_vec::<f32>().unwrap(), vec![2.0f32; n]);
    // arch options are kiln's, and a kernel that does not compile says where
    invalid(
        rt.raw_kernel(SAXPY, "saxpy", &["-arch=sm_80".into()]).map(drop),
        &["exact architecture"],
    );
    match rt.raw_kernel(
        "extern \"C\" __global__ void bad(float* y) {\n  y[0] = nope;\n}",
        "bad",
        &[],
    ) {
        Err(Error::Compile { log, .. }) => assert!(log.contains("user_bad.cu(2)"), "{log}"),
        other => panic!("expected Error::Compile, got {other:?}"),
    }
}

#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn a_kernel_kiln_cannot_read_is_checked_by_the_drivers_parameter_sizes() {
    let Some(rt) = gpu("a_kernel_kiln_cannot_read") else {
        return;
    };
    // a macro-spelled element type: kiln does not expand macros
    let src = MACRO_REAL;
    let k = rt.raw_kernel(src, "twice", &[]).unwrap();
    let n = 100usize;
    let y = rt.tensor(&vec![1.5f32; n], &[n]).unwrap();
    let args = [Arg::from(&y), (n as i32).into()];
    if k.param_sizes().is_none() {
        // a driver older than CUDA 12.4 cannot say: only a declared signature launches
        invalid(
            k.launch((1, 1, 1), (128, 1, 1), 0, &args),
            &["could not be parsed", "with_signature"],
        );
    } else {
        // the driver's sizes check the arguments: a pointer and 4 bytes pass, 8 do not
        k.launch((1, 1, 1), (128, 1, 1), 0, &args).unwrap();
        assert_eq!(y.to_vec::<f32>().unwrap(), vec![3.0f32; n]);
        let wide = [Arg::from(&y), (n as i64).into()];
        assert!(matches!(
            k.launch((1, 1, 1), (128, 1, 1), 0, &wide),
            Err(Error::InvalidArgument { .. })
        ));
        // a declaration of the wrong size is caught
        let e = k.with_signature("float* y, double n").unwrap_err();
        assert!(e.to_string().contains("bytes"), "{e}");
    }
    let before = y.to_vec::<f32>().unwrap();
    let k = k.with_signature("float* y, int n").unwrap();
    k.launch((1, 1, 1), (128, 1, 1), 0, &args).unwrap();
    let twice: Vec<f32> = before.iter().map(|v| 2.0 * v).collect();
    assert_eq!(y.to_vec::<f32>().unwrap(), twice);
}

/// The child half of the next test: poisons its own context, so it runs in its own process.
#[test]
#[ignore = "the child process of an_out_of_bounds_write_is_a_sticky_fault"]
fn raw_fault_child() {
    if std::env::var("KILN_RAW_FAULT_CHILD").as_deref() != Ok("1") {
        return;
    }
    let rt = testing::cuda_runtime_or_skip("raw_fault_child").unwrap();
    let src = OOB;
    let y = rt.tensor(&[0.0f32; 32], &[32]).unwrap();
    let k = rt.raw_kernel(src, "oob", &[]).unwrap();
    let launched = k.launch((1, 1, 1), (32, 1, 1), 0, &[Arg::from(&y)]);
    let e = launched.and_then(|()| y.to_vec::<f32>().map(drop)).unwrap_err();
    println!("RAW_FAULT_CHILD sticky={} message={e}", e.is_sticky());
}

#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn an_out_of_bounds_write_is_a_sticky_fault() {
    if !testing::gpu_or_skip("an_out_of_bounds_write_is_a_sticky_fault") {
        return;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "raw_fault_child",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("KILN_RAW_FAULT_CHILD", "1")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find_map(|l| l.find("RAW_FAULT_CHILD sticky").map(|i| &l[i..]))
        .unwrap_or_else(|| panic!("child said: {text}\n{}", String::from_utf8_lossy(&out.stderr)));
    assert!(line.contains("sticky=true"), "{line}");
    assert!(
        line.contains("CUDA_ERROR_ILLEGAL_ADDRESS") && line.contains("restart the process"),
        "{line}"
    );
}
