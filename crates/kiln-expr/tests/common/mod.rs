//! The test corpus: every kernel the CPU tests run, with the argument types it is bound to,
//! so the NVRTC test compiles exactly what the CPU tests check.
#![allow(dead_code)]

use kiln_expr::{ArgSpec, ElementwiseKernel, ReductionKernel, ScalarType};

/// An element-wise kernel: (in_params, out_params, operation, name).
pub type Ew = (&'static str, &'static str, &'static str, &'static str);
/// A reduction: (in, out, map, reduce, post, identity, name, reduce_type).
pub type Red = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    Option<&'static str>,
    &'static str,
    Option<&'static str>,
);

pub const EW: &[Ew] = &[
    ("T x, T y, T a, T b", "T z", "z = (a * x + y) * x - b", "fma4"),
    ("T x, T y", "T z", "z = x * y + 3", "mul3"),
    ("T x, T y", "T z", "z = x + y", "add"),
    ("T x, U s", "T z", "z = x * s", "scale"),
    ("raw T x", "T z", "z = x[_ind.size() - 1 - i]", "reverse"),
    ("raw T x, raw T y", "raw T z", "z[i] = x[i] + y[i]", "raw_add"),
    ("", "int64 z", "z = i * 2 + _ind.size()", "iota"),
    ("raw float32 x", "float32 z", "z = x.size()", "rawsize"),
    ("int32 a, int32 b", "int32 s, int32 d, int32 q, int32 r, int32 m, int32 o, int32 x, int32 l, int32 g", "s = a + b; d = a - b; q = b != 0 ? a / b : 0; r = b != 0 ? a % b : 0; m = a * b; o = a | b; x = a ^ b & 255; l = (a & 15) << (b & 7); g = a >> (b & 7)", "int_ops"),
    ("uint32 a, uint32 b", "uint32 s, uint32 d, uint32 q, uint32 m, uint32 n", "s = a + b; d = a - b; q = a / b; m = a * b; n = ~a", "uint_ops"),
    ("int64 a, int64 b", "int64 s, int64 d, int64 m, int64 q", "s = a + b; d = a - b; m = a * b; q = a / b", "i64_ops"),
    ("T a, T b", "bool lt, bool le, bool gt, bool ge, bool eq, bool ne, bool an, bool orr, bool nt", "lt = a < b; le = a <= b; gt = a > b; ge = a >= b; eq = a == b; ne = a != b; an = a > 0 && b > 0; orr = a > 0 || b > 0; nt = !(a > b)", "cmp"),
    ("T x", "T y", "y = x > 0 ? x : -x", "absdiff"),
    ("int32 a, int32 b", "float32 q", "q = a / b", "int_div_to_float"),
    ("uint32 x", "uint32 y, bool neg", "y = x - 1u; int s = -1; neg = s < x", "uint_wrap"),
    ("float32 x", "float32 d, float32 f", "d = x * 0.1; f = x * 0.1f", "float_vs_double"),
    ("int8 x, int8 y", "int8 z, int32 w", "z = x + y; w = x + y", "int8_wrap"),
    ("float32 x", "float32 y", "if (x > 1.0f) { float t = x * 2; if (t > 5) { y = t; } else { y = -t; } } else if (x < -1) { y = 0; } else { y = x; }", "nested_if"),
    ("float64 x", "float64 y", "double acc = 1; acc += x; acc *= 2; acc -= 1; acc /= 4; const double k = 2; y = acc * k", "compound"),
    ("int32 x, int32 y", "int32 z", "if (y != 0) { z = x / y; } else { z = -1; }", "div_guard"),
    ("float16 x, float16 y", "float16 z, float32 w", "z = x * y + x; w = x * y", "half_ops"),
    ("float32 x", "float32 y", "y = static_cast<float>((double)x * 3) + (float)(int)x + float(1)", "casts"),
    ("T x", "T y", "y = 1 / (1 + exp(-x))", "sigmoid"),
    ("float32 x", "float32 e, float32 l, float32 s, float32 t, float32 a", "e = expf(x); l = logf(fabsf(x) + 1); s = sqrtf(fabs(x)); t = tanhf(x); a = fabsf(x)", "f32_funcs"),
    ("T x, T y", "T r0, T r1, T r2, T r3, T r4, T r5, T r6, T r7, T r8, T r9, T r10, T r11, T r12, T r13, T r14, T r15, T r16, T r17, T r18, T r19, T r20, T r21, T r22", "r0 = exp(x); r1 = log(fabs(x) + 1); r2 = sqrt(fabs(x)); r3 = sin(x); r4 = cos(x); r5 = tan(x); r6 = tanh(x); r7 = fabs(x); r8 = pow(fabs(x), y); r9 = fmin(x, y); r10 = fmax(x, y); r11 = floor(x); r12 = ceil(x); r13 = erf(x); r14 = erfc(x); r15 = exp2(x); r16 = log2(fabs(x) + 1); r17 = log10(fabs(x) + 1); r18 = log1p(fabs(x)); r19 = expm1(x); r20 = rsqrt(fabs(x) + 1); r21 = copysign(x, y); r22 = min(x, y) + max(x, y) + abs(x)", "funcs"),
    ("float64 x", "bool n, bool f", "n = isnan(x); f = isinf(x)", "classify"),
    ("int32 a, int32 b", "int32 m, int32 n, int32 c", "m = min(a, b); n = max(a, b); c = abs(a)", "int_funcs"),
    ("T x, T y", "T z", "z = x; z += y", "out_read"),
    ("raw T x", "T z", "z = i + 1 < _ind.size() ? x[i + 1] : x[0]", "shift"),
    ("raw T x", "bool z", "z = i > 0 && x[i - 1] > 0", "guard_and"),
    (
        "T x, T y",
        "T a, T s, T m, T d, T n, T c, bool e, bool ne",
        "a = x + y; s = x - y; m = x * y; d = x / y; n = -x; c = conj(x); e = x == y; ne = x != y",
        "cplx_arith",
    ),
    (
        "T x, R r",
        "T a, T s, T rs, T m, T d, T rd, T p",
        "a = x + r; s = x - r; rs = r - x; m = r * x; d = x / r; rd = r / x; p = pow(x, r)",
        "cplx_mixed",
    ),
    (
        "complex64 z",
        "float32 re, float32 im, float32 ab, float32 ag",
        "re = real(z); im = imag(z); ab = abs(z); ag = arg(z)",
        "c64_parts",
    ),
    (
        "complex128 z",
        "float64 re, float64 im, float64 ab, float64 ag",
        "re = real(z); im = imag(z); ab = abs(z); ag = arg(z)",
        "c128_parts",
    ),
    (
        "T z, T w",
        "T e, T l, T q, T s, T c, T p",
        "e = exp(z); l = log(z); q = sqrt(z); s = sin(z); c = cos(z); p = pow(z, w)",
        "cplx_funcs",
    ),
    (
        "float32 re, float32 im",
        "complex64 z, complex128 w",
        "z = complex<float>(re, im); complex<double> t = z; t *= 2; w = t + complex<double>(1, im) - 1.5f",
        "cplx_build",
    ),
    (
        "T x, T y",
        "T z",
        "z = abs(x) > 1 ? x : y; if (real(x) < 0) { z = -z; } else { z += T(0.5, -0.25); }",
        "cplx_cond",
    ),
    ("raw T x", "T z", "z = x[_ind.size() - 1 - i] * 2", "cplx_rev"),
];

pub const RED: &[Red] = &[
    ("T x", "T y", "x", "a + b", "y = a", Some("0"), "my_sum", None),
    (
        "T x",
        "T y",
        "x",
        "max(a, b)",
        "y = a",
        Some("-INFINITY"),
        "my_max",
        None,
    ),
    (
        "T x",
        "T y",
        "x * x",
        "a + b",
        "y = sqrt(a)",
        Some("0"),
        "l2norm",
        None,
    ),
    (
        "T x",
        "float64 y",
        "x",
        "a + b",
        "y = a / (_in_ind.size() / _out_ind.size())",
        Some("0"),
        "mean",
        Some("double"),
    ),
    ("T x", "T y", "x", "a + b", "y = a", None, "sum_noid", None),
    (
        "T x, T w",
        "T y, T z",
        "x * w",
        "a + b",
        "y = a; z = a * 2",
        Some("0"),
        "wdot2",
        None,
    ),
];

pub fn ew(name: &str) -> ElementwiseKernel {
    let (i, o, op, n) = EW
        .iter()
        .find(|k| k.3 == name)
        .copied()
        .unwrap_or_else(|| panic!("no kernel {name}"));
    ElementwiseKernel::new(i, o, op, n).unwrap_or_else(|e| panic!("{name}: {e}"))
}

pub fn red(name: &str) -> ReductionKernel {
    let (i, o, m, r, p, id, n, rt) = RED
        .iter()
        .find(|k| k.6 == name)
        .copied()
        .unwrap_or_else(|| panic!("no reduction {name}"));
    ReductionKernel::new(i, o, m, r, p, id, n, rt).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Argument types each element-wise kernel is bound to in the tests.
pub fn ew_bindings(name: &str) -> Vec<(Vec<ArgSpec>, Option<usize>)> {
    use ScalarType::*;
    let arr = |t: ScalarType, shape: &[usize]| ArgSpec::Array {
        dtype: t,
        shape: shape.to_vec(),
    };
    let n = [1000usize];
    match name {
        "fma4" => vec![F32, F64]
            .into_iter()
            .map(|t| {
                (
                    vec![arr(t, &n), arr(t, &n), ArgSpec::Scalar(t), ArgSpec::Scalar(t)],
                    None,
                )
            })
            .collect(),
        "mul3" => vec![
            (vec![arr(I32, &n), arr(I32, &n)], None),
            (vec![arr(U8, &n), arr(U8, &n)], None),
        ],
        "add" => vec![
            (vec![arr(F32, &[3, 1, 5]), arr(F32, &[4, 5])], None),
            (vec![arr(I64, &n), ArgSpec::Scalar(I64)], None),
            (vec![arr(Bool, &n), arr(Bool, &n)], None),
            (vec![arr(C64, &n), ArgSpec::Scalar(C64)], None),
            (vec![arr(C128, &[3, 1, 5]), arr(C128, &[4, 5])], None),
        ],
        "scale" => vec![(vec![arr(F32, &n), ArgSpec::Scalar(F64)], None)],
        "reverse" | "shift" | "guard_and" => vec![(vec![arr(F64, &n)], Some(1000))],
        "raw_add" => vec![(vec![arr(F32, &n), arr(F32, &n)], Some(1000))],
        "iota" => vec![(vec![], Some(1000))],
        "rawsize" => vec![(vec![arr(F32, &n)], Some(1000))],
        "float_vs_double" | "nested_if" | "casts" | "f32_funcs" => vec![(vec![arr(F32, &n)], None)],
        "int_ops" | "int_div_to_float" | "div_guard" | "int_funcs" => {
            vec![(vec![arr(I32, &n), arr(I32, &n)], None)]
        }
        "uint_ops" => vec![(vec![arr(U32, &n), arr(U32, &n)], None)],
        "i64_ops" => vec![(vec![arr(I64, &n), arr(I64, &n)], None)],
        "cmp" => vec![
            (vec![arr(F32, &n), arr(F32, &n)], None),
            (vec![arr(I64, &n), arr(I64, &n)], None),
        ],
        "absdiff" | "sigmoid" => vec![
            (vec![arr(F32, &n)], None),
            (vec![arr(F64, &n)], None),
            (vec![arr(F16, &n)], None),
        ],
        "uint_wrap" => vec![(vec![arr(U32, &n)], None)],
        "int8_wrap" => vec![(vec![arr(I8, &n), arr(I8, &n)], None)],
        "compound" | "classify" => vec![(vec![arr(F64, &n)], None)],
        "half_ops" => vec![(vec![arr(F16, &n), arr(F16, &n)], None)],
        "funcs" => vec![
            (vec![arr(F32, &n), arr(F32, &n)], None),
            (vec![arr(F64, &n), arr(F64, &n)], None),
        ],
        "out_read" => vec![(vec![arr(F32, &n), arr(F32, &n)], None)],
        "cplx_arith" | "cplx_funcs" | "cplx_cond" => vec![
            (vec![arr(C64, &n), arr(C64, &n)], None),
            (vec![arr(C128, &n), arr(C128, &n)], None),
            (vec![arr(C64, &[10, 100]), ArgSpec::Scalar(C64)], None),
            (vec![arr(C128, &[3, 1, 5]), arr(C128, &[4, 5])], None),
        ],
        "cplx_mixed" => vec![
            (vec![arr(C64, &n), arr(F32, &n)], None),
            (vec![arr(C128, &n), arr(F64, &n)], None),
            (vec![arr(C64, &n), ArgSpec::Scalar(F64)], None),
        ],
        "c64_parts" => vec![(vec![arr(C64, &n)], None)],
        "c128_parts" => vec![(vec![arr(C128, &n)], None)],
        "cplx_build" => vec![(vec![arr(F32, &n), arr(F32, &n)], None)],
        "cplx_rev" => vec![
            (vec![arr(C64, &n)], Some(1000)),
            (vec![arr(C128, &n)], Some(1000)),
        ],
        other => panic!("no bindings for {other}"),
    }
}

/// (input types and shapes, axis, keepdims) each reduction is bound to.
pub fn red_bindings(name: &str) -> Vec<(Vec<ArgSpec>, kiln_expr::Axis, bool)> {
    use kiln_expr::Axis;
    use ScalarType::*;
    let arr = |t: ScalarType, shape: &[usize]| ArgSpec::Array {
        dtype: t,
        shape: shape.to_vec(),
    };
    match name {
        "wdot2" => vec![(vec![arr(F64, &[6, 7]), arr(F64, &[7])], Axis::One(1), false)],
        _ => vec![
            (vec![arr(F32, &[2, 3, 4])], Axis::All, false),
            (vec![arr(F64, &[2, 3, 4])], Axis::Many(vec![0, -1]), true),
            (vec![arr(I8, &[100])], Axis::One(0), false),
        ],
    }
}
