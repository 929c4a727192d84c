//! Complex values in the generated CUDA source.
//!
//! `complex64` and `complex128` are two small structs of their parts, `_kiln_c64 {float re,
//! im;}` and `_kiln_c128 {double re, im;}`, with every operation an inline function written
//! as explicit real arithmetic. The CPU evaluator (`cpu/complex.rs`) lowers the same
//! operations to the same real operations in the same order, and kernels are compiled
//! without FMA contraction, so `+ - * /`, negation, `conj`, `real`, `imag`, comparisons and
//! conversions give the same bits on both devices; `abs`, `arg`, `exp`, `log`, `sqrt`,
//! `sin`, `cos` and `pow` call the real math functions, which agree to their ulp bounds.
//!
//! The formulas are CuPy's (`cupy/complex/arithmetic.h`, from thrust) where CuPy has one:
//! products and quotients of a complex and a real value work on the parts, `abs` is
//! `hypot`, `arg` is `atan2`, and division scales both operands by `1 / (|c| + |d|)`
//! before the textbook formula (no overflow or underflow of `c*c + d*d` for operands of
//! any magnitude, at one extra division). `exp`, `log`, `sqrt`, `sin`, `cos` and `pow` are
//! the textbook formulas with the C99 special cases that cost one select (see
//! `docs/user-kernels.md`), not CuPy's FreeBSD ports.
//!
//! In memory a complex array is its pairs of parts, aligned as its part type (so any
//! NumPy-valid view works); a kernel parameter is declared as a pointer to the part type
//! and re-typed inside the kernel, and a complex scalar is passed as two part-typed
//! parameters (its real part, [`KernelParam::Scalar`], then its imaginary part,
//! [`KernelParam::ScalarImag`]), so the launch sees only C types it checks.

use crate::cuda::{lit, KernelParam};
use crate::func::Func;
use crate::parse::BinOp;
use crate::types::{ScalarType, Value};

/// The helper functions of one complex type: `$C` is the struct, `$T` the part type, `$F`
/// the math functions' suffix, `$INF`/`$NAN` the part type's infinity and quiet NaN (the
/// CPU's bit patterns).
const TEMPLATE: &str = r#"__device__ __forceinline__ $C $C_make($T re, $T im) { $C z; z.re = re; z.im = im; return z; }
__device__ __forceinline__ $C $C_add($C a, $C b) { return $C_make(a.re + b.re, a.im + b.im); }
__device__ __forceinline__ $C $C_addr($C a, $T x) { return $C_make(a.re + x, a.im); }
__device__ __forceinline__ $C $C_sub($C a, $C b) { return $C_make(a.re - b.re, a.im - b.im); }
__device__ __forceinline__ $C $C_subr($C a, $T x) { return $C_make(a.re - x, a.im); }
__device__ __forceinline__ $C $C_rsub($T x, $C b) { return $C_make(x - b.re, -b.im); }
__device__ __forceinline__ $C $C_mul($C a, $C b) { return $C_make(a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re); }
__device__ __forceinline__ $C $C_mulr($C a, $T x) { return $C_make(a.re * x, a.im * x); }
__device__ __forceinline__ $C $C_div($C a, $C b) {
  $T s = fabs$F(b.re) + fabs$F(b.im);
  $T oos = ($T)1 / s;
  $T ars = a.re * oos, ais = a.im * oos, brs = b.re * oos, bis = b.im * oos;
  s = brs * brs + bis * bis;
  oos = ($T)1 / s;
  return $C_make((ars * brs + ais * bis) * oos, (ais * brs - ars * bis) * oos);
}
__device__ __forceinline__ $C $C_divr($C a, $T x) { return $C_make(a.re / x, a.im / x); }
__device__ __forceinline__ $C $C_neg($C a) { return $C_make(-a.re, -a.im); }
__device__ __forceinline__ $C $C_conj($C a) { return $C_make(a.re, -a.im); }
__device__ __forceinline__ bool $C_eq($C a, $C b) { return a.re == b.re && a.im == b.im; }
__device__ __forceinline__ bool $C_ne($C a, $C b) { return a.re != b.re || a.im != b.im; }
__device__ __forceinline__ $T $C_abs($C a) { return hypot$F(a.re, a.im); }
__device__ __forceinline__ $T $C_arg($C a) { return atan2$F(a.im, a.re); }
__device__ __forceinline__ $C $C_exp($C a) {
  $T e = exp$F(a.re);
  $C w = $C_make(e * cos$F(a.im), e * sin$F(a.im));
  return a.im == ($T)0 ? $C_make(e, a.im) : w;
}
__device__ __forceinline__ $C $C_log($C a) { return $C_make(log$F(hypot$F(a.re, a.im)), atan2$F(a.im, a.re)); }
__device__ __forceinline__ $C $C_sqrt($C a) {
  $T ar = fabs$F(a.re), ai = fabs$F(a.im);
  $T t = sqrt$F(($T)0.5 * ar + ($T)0.5 * hypot$F(a.re, a.im));
  $T d = t + t;
  $C w = a.re >= ($T)0 ? $C_make(t, a.im / d) : $C_make(ai / d, copysign$F(t, a.im));
  w = ai == $INF ? $C_make(ai, a.im) : w;
  return (a.re == ($T)0 && a.im == ($T)0) ? $C_make(($T)0, a.im) : w;
}
__device__ __forceinline__ $C $C_sin($C a) { return $C_make(sin$F(a.re) * cosh$F(a.im), cos$F(a.re) * sinh$F(a.im)); }
__device__ __forceinline__ $C $C_cos($C a) { return $C_make(cos$F(a.re) * cosh$F(a.im), -(sin$F(a.re) * sinh$F(a.im))); }
__device__ __forceinline__ $C $C_pow($C a, $C b) {
  $C w = $C_exp($C_mul(b, $C_log(a)));
  $C z = (b.re > ($T)0 && b.im == ($T)0) ? $C_make(($T)0, ($T)0) : $C_make($NAN, $NAN);
  w = (a.re == ($T)0 && a.im == ($T)0) ? z : w;
  return (b.re == ($T)0 && b.im == ($T)0) ? $C_make(($T)1, ($T)0) : w;
}
__device__ __forceinline__ $C $C_powr($C a, $T x) {
  $C w = $C_exp($C_mulr($C_log(a), x));
  $C z = x > ($T)0 ? $C_make(($T)0, ($T)0) : $C_make($NAN, $NAN);
  w = (a.re == ($T)0 && a.im == ($T)0) ? z : w;
  return x == ($T)0 ? $C_make(($T)1, ($T)0) : w;
}
"#;

/// The structs and helpers of both complex types (emitted only into kernels that use a
/// complex type, so every other kernel's source is unchanged).
pub(crate) fn helpers() -> String {
    let mut s = String::from("struct _kiln_c64 { float re, im; };\nstruct _kiln_c128 { double re, im; };\n");
    for t in [ScalarType::C64, ScalarType::C128] {
        let p = t.part();
        let text = TEMPLATE
            .replace("$INF", &lit(Value::F(f64::INFINITY), p))
            .replace("$NAN", &lit(Value::F(f64::NAN), p))
            .replace("$C", t.c_name())
            .replace("$T", p.c_name())
            .replace("$F", if p == ScalarType::F64 { "" } else { "f" });
        s.push_str(&text);
    }
    s.push_str("__device__ __forceinline__ _kiln_c128 _kiln_c128_from(_kiln_c64 a) { return _kiln_c128_make((double)a.re, (double)a.im); }\n");
    s.push_str("__device__ __forceinline__ _kiln_c64 _kiln_c64_from(_kiln_c128 a) { return _kiln_c64_make((float)a.re, (float)a.im); }\n");
    s
}

/// The helper's name for operation `op` of complex type `t` (`_kiln_c64_add`).
fn helper(t: ScalarType, op: &str) -> String {
    format!("{}_{op}", t.c_name())
}

/// `a op b` with a complex result of type `t`; `a` or `b` may be real (of `t`'s part type).
pub(crate) fn bin(op: BinOp, t: ScalarType, a: (String, bool), b: (String, bool)) -> String {
    let ((x, xc), (y, yc)) = (a, b);
    let name = match (op, xc, yc) {
        (BinOp::Add, true, true) => "add",
        (BinOp::Sub, true, true) => "sub",
        (BinOp::Mul, true, true) => "mul",
        (BinOp::Div, _, _) if yc => "div",
        (BinOp::Add, true, false) => "addr",
        (BinOp::Add, false, true) => return format!("{}({y}, {x})", helper(t, "addr")),
        (BinOp::Sub, true, false) => "subr",
        (BinOp::Sub, false, true) => "rsub",
        (BinOp::Mul, true, false) => "mulr",
        (BinOp::Mul, false, true) => return format!("{}({y}, {x})", helper(t, "mulr")),
        _ => "divr",
    };
    format!("{}({x}, {y})", helper(t, name))
}

/// `a == b` or `a != b` of two complex values of type `t`.
pub(crate) fn cmp(op: BinOp, t: ScalarType, a: &str, b: &str) -> String {
    let name = if op == BinOp::Ne { "ne" } else { "eq" };
    format!("{}({a}, {b})", helper(t, name))
}

/// `-a`.
pub(crate) fn neg(t: ScalarType, a: &str) -> String {
    format!("{}({a})", helper(t, "neg"))
}

/// A complex function of arguments of complex type `t` (the exponent of `pow` may be real:
/// `real_exp`).
pub(crate) fn call(f: Func, t: ScalarType, args: &[String], real_exp: bool) -> String {
    let a = &args[0];
    match f {
        Func::Real => format!("({a}).re"),
        Func::Imag => format!("({a}).im"),
        Func::Pow => {
            let name = if real_exp { "powr" } else { "pow" };
            format!("{}({a}, {})", helper(t, name), args[1])
        }
        _ => {
            let name = match f {
                Func::Conj => "conj",
                Func::Abs => "abs",
                Func::Arg => "arg",
                Func::Exp => "exp",
                Func::Log => "log",
                Func::Sqrt => "sqrt",
                Func::Sin => "sin",
                _ => "cos",
            };
            format!("{}({a})", helper(t, name))
        }
    }
}

/// A complex value of type `t` from part expressions.
pub(crate) fn make(t: ScalarType, re: &str, im: &str) -> String {
    format!("{}({re}, {im})", helper(t, "make"))
}

/// A complex constant.
pub(crate) fn constant(v: Value, t: ScalarType) -> String {
    let (re, im) = v.parts();
    let p = t.part();
    make(t, &lit(Value::F(re), p), &lit(Value::F(im), p))
}

/// The statements at the top of a kernel that re-type its complex parameters: each complex
/// array's part pointer as a pointer to the struct, each complex scalar's two parts as one
/// value of its name.
pub(crate) fn param_aliases(params: &[KernelParam], pad: &str) -> String {
    let mut s = String::new();
    for p in params {
        match p {
            KernelParam::Array { name, dtype, output } if dtype.is_complex() => {
                let c = if *output { "" } else { "const " };
                s.push_str(&format!(
                    "{pad}{c}{t}* __restrict__ _p_{name} = ({c}{t}*)_pc_{name};\n",
                    t = dtype.c_name()
                ));
            }
            KernelParam::ScalarImag { name, dtype } => {
                s.push_str(&format!(
                    "{pad}const {} {name} = {};\n",
                    dtype.c_name(),
                    make(*dtype, &format!("_sr_{name}"), &format!("_si_{name}"))
                ));
            }
            _ => {}
        }
    }
    s
}

/// Whether the kernel has a complex parameter (and so needs the helpers).
pub(crate) fn uses_complex(types: &[ScalarType]) -> bool {
    types.iter().any(|t| t.is_complex())
}
