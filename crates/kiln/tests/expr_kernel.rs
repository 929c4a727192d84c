//! Users' element-wise and reduction expression kernels through the facade
//! (`Runtime::elementwise_kernel`, `Runtime::reduction_kernel`): the GPU result is compared
//! bit for bit with the CPU evaluator's (reductions, whose float sums run in another order:
//! by relative L2 error) on random inputs at odd sizes (broadcasting, raw
//! parameters, strided inputs, scalars, every kind of dtype, reductions over every axis
//! form), and a CPU runtime runs the evaluator itself. The GPU tests skip (printing why)
//! without a GPU and fail instead under KILN_REQUIRE_GPU=1.
#![allow(clippy::unwrap_used)] // helpers outside #[test] fns unwrap too

use kiln::core::backend::f16;
use kiln::expr::{Arg, Axis, ElementwiseKernel, HostArray, OwnedArray, ReductionKernel, Scalar, ScalarType};
use kiln::{testing, Runtime};
use rand::{Rng, SeedableRng};

fn gpu(test: &str) -> Option<&'static Runtime> {
    testing::cuda_runtime_or_skip(test)
}

fn ew(ins: &str, outs: &str, body: &str, name: &str) -> ElementwiseKernel {
    ElementwiseKernel::new(ins, outs, body, name).unwrap()
}

/// The kernel on the GPU and on the CPU with the same inputs: every output equal bit for
/// bit (dtype, shape and bytes).
fn same_elementwise(
    rt: &Runtime,
    k: &ElementwiseKernel,
    args: &[Arg<'_>],
    size: Option<usize>,
) -> Vec<OwnedArray> {
    let g = rt.elementwise_kernel(k, args, size).unwrap();
    let c = Runtime::cpu().elementwise_kernel(k, args, size).unwrap();
    same(k.name(), &g, &c);
    g
}

fn same_reduction(
    rt: &Runtime,
    k: &ReductionKernel,
    args: &[Arg<'_>],
    axis: &Axis,
    keepdims: bool,
) -> Vec<OwnedArray> {
    let g = rt.reduction_kernel(k, args, axis, keepdims).unwrap();
    let c = Runtime::cpu().reduction_kernel(k, args, axis, keepdims).unwrap();
    close(&format!("{} axis {axis:?} keepdims {keepdims}", k.name()), &g, &c);
    g
}

/// A float reduction's sum order differs between the GPU (a tree over threads) and the CPU
/// evaluator (chunks in order), so its result is compared by relative L2 error, with a
/// bound of a few thousand ulps at these sizes; integer and boolean outputs are exact.
fn close(what: &str, g: &[OwnedArray], c: &[OwnedArray]) {
    assert_eq!(g.len(), c.len(), "{what}");
    for (j, (a, b)) in g.iter().zip(c).enumerate() {
        assert_eq!((a.dtype, &a.shape), (b.dtype, &b.shape), "{what} output {j}");
        let decode = |x: &OwnedArray| -> Option<Vec<f64>> {
            let ch = x.bytes.chunks_exact(x.dtype.size());
            Some(match x.dtype {
                ScalarType::F16 => ch
                    .map(|c| f64::from(f16::from_le_bytes([c[0], c[1]]).to_f32()))
                    .collect(),
                ScalarType::F32 => ch
                    .map(|c| f64::from(f32::from_le_bytes([c[0], c[1], c[2], c[3]])))
                    .collect(),
                ScalarType::F64 => ch
                    .map(|c| f64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
                    .collect(),
                _ => return None,
            })
        };
        let tol = match a.dtype {
            ScalarType::F16 => 1e-2,
            ScalarType::F32 => 1e-5,
            _ => 1e-12,
        };
        match (decode(a), decode(b)) {
            (Some(x), Some(y)) => {
                let (mut num, mut den) = (0.0f64, 0.0f64);
                for (k, (p, q)) in x.iter().zip(&y).enumerate() {
                    // NaN and infinities must stand in the same places (an infinity of the
                    // same sign); the finite rest is compared by relative L2 error
                    if !p.is_finite() || !q.is_finite() {
                        assert!(
                            (p.is_nan() && q.is_nan()) || p == q,
                            "{what} output {j} element {k}: GPU {p}, CPU {q}"
                        );
                        continue;
                    }
                    num += (p - q) * (p - q);
                    den += q * q;
                }
                let rel = (num / den.max(f64::MIN_POSITIVE)).sqrt();
                let worst = x
                    .iter()
                    .zip(&y)
                    .enumerate()
                    .filter(|(_, (p, q))| p.is_finite() && q.is_finite())
                    .max_by(|(_, (p, q)), (_, (r, s))| (*p - *q).abs().total_cmp(&(*r - *s).abs()));
                assert!(
                    num == 0.0 || rel <= tol,
                    "{what} output {j} ({}): relative L2 error {rel:e} over {tol:e}; largest difference at (element, (GPU, CPU)) {worst:?}",
                    a.dtype
                );
            }
            _ => same(what, std::slice::from_ref(a), std::slice::from_ref(b)),
        }
    }
}

fn same(what: &str, g: &[OwnedArray], c: &[OwnedArray]) {
    assert_eq!(g.len(), c.len(), "{what}");
    for (j, (a, b)) in g.iter().zip(c).enumerate() {
        assert_eq!((a.dtype, &a.shape), (b.dtype, &b.shape), "{what} output {j}");
        if a.bytes != b.bytes {
            let item = a.dtype.size();
            let at = a
                .bytes
                .chunks(item)
                .zip(b.bytes.chunks(item))
                .position(|(x, y)| x != y)
                .unwrap_or(0);
            panic!(
                "{what} output {j} ({}): element {at} differs: GPU {:?}, CPU {:?}",
                a.dtype,
                &a.bytes[at * item..(at + 1) * item],
                &b.bytes[at * item..(at + 1) * item]
            );
        }
    }
}

fn f32s(n: usize, seed: u64) -> Vec<f32> {
    testing::random_f32(n, -4.0, 4.0, seed)
}

fn arr<'a, T: kiln::expr::Element>(shape: &[usize], v: &'a [T]) -> Arg<'a> {
    Arg::Array(HostArray::from_slice(shape, v))
}

/// An element-wise kernel on a CPU runtime is kiln-expr's evaluator (runs in CI).
#[test]
fn a_cpu_runtime_runs_the_evaluator() {
    let k = ew(
        "float32 x, float32 y, float32 a",
        "float32 z",
        "z = a * x + y",
        "axpy",
    );
    let (x, y) = (f32s(1001, 1), f32s(1001, 2));
    let args = [arr(&[1001], &x), arr(&[1001], &y), Arg::Scalar(Scalar::F32(1.5))];
    let got = Runtime::cpu().elementwise_kernel(&k, &args, None).unwrap();
    assert_eq!(got, k.call_alloc(&args, None).unwrap());
    let z = got[0].to_vec::<f32>().unwrap();
    assert_eq!(z[7], 1.5 * x[7] + y[7]);

    let r = ReductionKernel::new(
        "T x",
        "T y",
        "x * x",
        "a + b",
        "y = sqrt(a)",
        Some("0"),
        "l2",
        None,
    )
    .unwrap();
    let m = f32s(7 * 13, 3);
    let args = [arr(&[7, 13], &m)];
    let got = Runtime::cpu()
        .reduction_kernel(&r, &args, &Axis::One(1), false)
        .unwrap();
    assert_eq!(got, r.call_alloc(&args, &Axis::One(1), false).unwrap());
    assert_eq!(got[0].shape, [7]);

    // a preamble (or a body outside the C subset) needs the GPU: a clear error on the CPU
    let pre = ew("float32 x", "float32 z", "z = twice(x)", "pre")
        .with_preamble("__device__ float twice(float v) { return 2 * v; }");
    let e = Runtime::cpu()
        .elementwise_kernel(&pre, &[arr(&[3], &[1.0f32, 2.0, 3.0])], None)
        .unwrap_err();
    assert!(e.to_string().contains("only on the GPU"), "{e}");
}

/// The sources the GPU tests generate compile with NVRTC as the facade compiles them
/// (`--fmad=false`; needs only libnvrtc).
#[test]
fn generated_sources_compile_without_fma_contraction() {
    use kiln::expr::ArgSpec;
    use kiln::kernels::UserSource;
    if !kiln::device::nvrtc_available() {
        testing::skip_unless_required(
            "KILN_REQUIRE_NVRTC",
            "generated_sources_compile",
            "libnvrtc cannot be loaded",
        );
        return;
    }
    let k = ew(
        "float32 x, float32 y, float32 a",
        "float32 z",
        "z = a * x + y",
        "axpy",
    );
    let f = |s: &[usize]| ArgSpec::Array {
        dtype: kiln::expr::ScalarType::F32,
        shape: s.to_vec(),
    };
    let b = k
        .bind(
            &[
                f(&[37, 129]),
                f(&[129]),
                ArgSpec::Scalar(kiln::expr::ScalarType::F32),
            ],
            &[],
            None,
        )
        .unwrap();
    let src = k.cuda_source(&b).unwrap();
    let u = UserSource::new(&src, &["--fmad=false".to_string()]).unwrap();
    u.compile("sm_90").unwrap();
    let r = ReductionKernel::new("T x", "T y", "x", "a + b", "y = a", Some("0"), "s", None).unwrap();
    let rb = r.bind(&[f(&[5, 9])], &[], &Axis::One(1), false).unwrap();
    let u = UserSource::new(&r.cuda_source(&rb).unwrap(), &["--fmad=false".to_string()]).unwrap();
    u.compile("sm_90").unwrap();
}

/// Float arithmetic, broadcasting, scalars and a multiply-add (where FMA contraction would
/// change the last bit) at odd sizes.
#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn elementwise_float_kernels_match_the_cpu_bitwise() {
    let Some(rt) = gpu("elementwise_float_kernels_match_the_cpu_bitwise") else {
        return;
    };
    let seed = testing::fresh_seed();
    let axpy = ew(
        "float32 x, float32 y, float32 a",
        "float32 z",
        "z = a * x + y",
        "axpy",
    );
    for n in [1usize, 7, 1_000_003] {
        let (x, y) = (f32s(n, seed), f32s(n, seed + 1));
        let out = same_elementwise(
            rt,
            &axpy,
            &[arr(&[n], &x), arr(&[n], &y), Arg::Scalar(Scalar::F32(1.7))],
            None,
        );
        let z = out[0].to_vec::<f32>().unwrap();
        // the unfused product then sum: what --fmad=false gives
        assert_eq!(z[n / 2].to_bits(), (1.7f32 * x[n / 2] + y[n / 2]).to_bits());
    }
    // (37, 129) with a (129,) row and a (37, 1) column, two outputs, a branch
    let (x, row, col) = (f32s(37 * 129, seed + 2), f32s(129, seed + 3), f32s(37, seed + 4));
    let k = ew(
        "T x, T r, T c",
        "T u, T v",
        "T t = x * r - c / (r * r + 1);\nif (t > 0) { u = sqrt(t); } else { u = -t * c; }\nv = fmax(x, r) + (T)i;",
        "bcast",
    );
    same_elementwise(
        rt,
        &k,
        &[arr(&[37, 129], &x), arr(&[129], &row), arr(&[37, 1], &col)],
        None,
    );
    // float64, with an int scalar converted to the placeholder's type
    let xd: Vec<f64> = f32s(4099, seed + 5)
        .iter()
        .map(|&v| v as f64 * 1.000_000_1)
        .collect();
    let k = ew("T x, T s", "T y", "y = x * x * s - x / s", "poly64");
    same_elementwise(rt, &k, &[arr(&[4099], &xd), Arg::Scalar(Scalar::I64(3))], None);
    // half: arithmetic in float, rounded back to half after each operation
    let xh: Vec<f16> = f32s(2049, seed + 6).iter().map(|&v| f16::from_f32(v)).collect();
    let k = ew("float16 x", "float16 y", "y = x * x + x / 3", "half");
    same_elementwise(rt, &k, &[arr(&[2049], &xh)], None);
    // an output the body leaves unwritten keeps its zero on both devices
    let k = ew("float32 x", "float32 y", "if (x > 1) y = x;", "partial");
    let x = f32s(999, seed + 7);
    same_elementwise(rt, &k, &[arr(&[999], &x)], None);
}

/// Integer and bool kernels (C's truncating division and modulo, shifts, comparisons), raw
/// parameters with `size`, and a strided input.
#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn elementwise_integer_raw_and_strided_kernels_match_the_cpu() {
    let Some(rt) = gpu("elementwise_integer_raw_and_strided_kernels_match_the_cpu") else {
        return;
    };
    let seed = testing::fresh_seed();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let a: Vec<i32> = (0..3001).map(|_| rng.random_range(-100_000..100_000)).collect();
    let b: Vec<i32> = (0..3001)
        .map(|_| rng.random_range(1..500) * if rng.random_bool(0.5) { 1 } else { -1 })
        .collect();
    let k = ew(
        "int32 a, int32 b",
        "int32 q, int32 r, bool m, uint32 s",
        "q = a / b; r = a % b; m = a > b * 100; s = ((unsigned int)a >> 3) ^ (unsigned int)b;",
        "ints",
    );
    same_elementwise(rt, &k, &[arr(&[3001], &a), arr(&[3001], &b)], None);
    // raw: reverse and shift, the loop's size given
    let x = f32s(1000, seed + 1);
    let k = ew(
        "raw float32 x",
        "float32 y",
        "y = x[_ind.size() - 1 - i] + x[(i * 7) % 1000]",
        "rev",
    );
    same_elementwise(rt, &k, &[arr(&[1000], &x)], Some(1000));
    // a transposed (strided) view
    let m = f32s(17 * 31, seed + 2);
    let mut t = HostArray::from_slice(&[17, 31], &m);
    t.shape = vec![31, 17];
    t.strides = vec![1, 31];
    let k = ew("float32 x", "float32 y", "y = x * 2 - 1", "twice");
    let out = same_elementwise(rt, &k, &[Arg::Array(t)], None);
    let y = out[0].to_vec::<f32>().unwrap();
    assert_eq!(y[1], m[31] * 2.0 - 1.0, "row 0, column 1 of the transpose");
}

/// Reductions over one axis, several, every axis (also kept), negative axes, a broadcast
/// scalar, an identity over an empty axis, float32 and float64.
#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn reductions_match_the_cpu() {
    let Some(rt) = gpu("reductions_match_the_cpu") else {
        return;
    };
    let seed = testing::fresh_seed();
    let sum = ReductionKernel::new("T x", "T y", "x", "a + b", "y = a", Some("0"), "rsum", None).unwrap();
    let l2 = ReductionKernel::new(
        "T x, T w",
        "T y",
        "x * x * w",
        "a + b",
        "y = sqrt(a)",
        Some("0"),
        "l2w",
        None,
    )
    .unwrap();
    let mx = ReductionKernel::new(
        "T x",
        "T y",
        "x",
        "fmax(a, b)",
        "y = a",
        Some("-INFINITY"),
        "rmax",
        None,
    )
    .unwrap();
    let m = f32s(513 * 257, seed);
    let a = [arr(&[513, 257], &m)];
    for axis in [
        Axis::One(1),
        Axis::One(0),
        Axis::One(-1),
        Axis::All,
        Axis::Many(vec![0, 1]),
    ] {
        for keepdims in [false, true] {
            same_reduction(rt, &sum, &a, &axis, keepdims);
            same_reduction(rt, &mx, &a, &axis, keepdims);
        }
    }
    same_reduction(
        rt,
        &l2,
        &[arr(&[513, 257], &m), Arg::Scalar(Scalar::F32(0.5))],
        &Axis::One(0),
        false,
    );
    let cube = f32s(5 * 33 * 19, seed + 1);
    same_reduction(
        rt,
        &sum,
        &[arr(&[5, 33, 19], &cube)],
        &Axis::Many(vec![0, 2]),
        false,
    );
    let d: Vec<f64> = f32s(100_003, seed + 2).iter().map(|&v| v as f64 / 3.0).collect();
    let out = same_reduction(rt, &sum, &[arr(&[100_003], &d)], &Axis::All, false);
    assert_eq!(out[0].shape, Vec::<usize>::new());
    // an empty reduced axis gives the identity
    let empty: Vec<f32> = Vec::new();
    let out = same_reduction(rt, &mx, &[arr(&[3, 0], &empty)], &Axis::One(1), false);
    assert!(out[0]
        .to_vec::<f32>()
        .unwrap()
        .iter()
        .all(|v| *v == f32::NEG_INFINITY));
}

/// complex64 and complex128: arithmetic (CuPy's formulas, which the CPU evaluator computes
/// the same way), a complex scalar passed as its two parts, a real array mixed in, and
/// `real`/`imag`/`conj` at odd sizes, bit for bit.
#[test]
#[cfg_attr(
    not(feature = "gpu-tests"),
    ignore = "needs a GPU: cargo test --features gpu-tests"
)]
fn complex_kernels_match_the_cpu_bitwise() {
    let Some(rt) = gpu("complex_kernels_match_the_cpu_bitwise") else {
        return;
    };
    let seed = testing::fresh_seed();
    let k = ew(
        "T z, T w, T a, R r",
        "T u, T v, R q",
        "u = a * z + w / (z + a);\nv = conj(z) * r - w;\nq = real(u) + imag(v) * r;",
        "cplx",
    );
    for n in [1usize, 7, 4099, 100_003] {
        let parts = f32s(2 * n, seed);
        let others = f32s(2 * n, seed + 1);
        let r = f32s(n, seed + 2);
        // complex64: pairs of f32 parts
        let (z, w) = (
            HostArray::contiguous(ScalarType::C64, &[n], bytemuck_f32(&parts)),
            HostArray::contiguous(ScalarType::C64, &[n], bytemuck_f32(&others)),
        );
        same_elementwise(
            rt,
            &k,
            &[
                Arg::Array(z),
                Arg::Array(w),
                Arg::Scalar(Scalar::C128(0.75, -1.25)),
                arr(&[n], &r),
            ],
            None,
        );
        // complex128, the real array broadcast as a (1,) row
        let p64: Vec<f64> = parts.iter().map(|&x| x as f64 * 1.000_000_1).collect();
        let o64: Vec<f64> = others.iter().map(|&x| x as f64).collect();
        let r1 = [2.5f64];
        same_elementwise(
            rt,
            &k,
            &[
                Arg::Array(HostArray::contiguous(ScalarType::C128, &[n], bytemuck_f64(&p64))),
                Arg::Array(HostArray::contiguous(ScalarType::C128, &[n], bytemuck_f64(&o64))),
                Arg::Scalar(Scalar::C128(-0.5, 3.0)),
                arr(&[1], &r1),
            ],
            None,
        );
    }
}

fn bytemuck_f32(v: &[f32]) -> &[u8] {
    <f32 as kiln::expr::Element>::as_bytes(v)
}

fn bytemuck_f64(v: &[f64]) -> &[u8] {
    <f64 as kiln::expr::Element>::as_bytes(v)
}
