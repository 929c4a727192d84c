//! The math functions of the C subset: names, arity and their CUDA spellings.

use crate::types::ScalarType;

/// Math functions the C subset accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub(crate) enum Func {
    Exp,
    Log,
    Sqrt,
    Sin,
    Cos,
    Tan,
    Tanh,
    Sinh,
    Cosh,
    Asin,
    Acos,
    Atan,
    Fabs,
    Floor,
    Ceil,
    Round,
    Trunc,
    Erf,
    Erfc,
    Exp2,
    Log2,
    Log10,
    Log1p,
    Expm1,
    Rsqrt,
    Cbrt,
    Pow,
    Fmin,
    Fmax,
    Copysign,
    Atan2,
    Fmod,
    Hypot,
    Min,
    Max,
    Abs,
    Isnan,
    Isinf,
    Isfinite,
    /// `real(z)`: a complex value's real part (a real value itself).
    Real,
    /// `imag(z)`: the imaginary part (0 for a real value).
    Imag,
    /// `conj(z)`: the complex conjugate.
    Conj,
    /// `arg(z)`: the phase angle, `atan2(imag, real)`.
    Arg,
}

/// The C names of the functions.
const NAMES: [(&str, Func); 43] = {
    use Func::*;
    [
        ("exp", Exp),
        ("log", Log),
        ("sqrt", Sqrt),
        ("sin", Sin),
        ("cos", Cos),
        ("tan", Tan),
        ("tanh", Tanh),
        ("sinh", Sinh),
        ("cosh", Cosh),
        ("asin", Asin),
        ("acos", Acos),
        ("atan", Atan),
        ("fabs", Fabs),
        ("floor", Floor),
        ("ceil", Ceil),
        ("round", Round),
        ("trunc", Trunc),
        ("erf", Erf),
        ("erfc", Erfc),
        ("exp2", Exp2),
        ("log2", Log2),
        ("log10", Log10),
        ("log1p", Log1p),
        ("expm1", Expm1),
        ("rsqrt", Rsqrt),
        ("cbrt", Cbrt),
        ("pow", Pow),
        ("fmin", Fmin),
        ("fmax", Fmax),
        ("copysign", Copysign),
        ("atan2", Atan2),
        ("fmod", Fmod),
        ("hypot", Hypot),
        ("min", Min),
        ("max", Max),
        ("abs", Abs),
        ("isnan", Isnan),
        ("isinf", Isinf),
        ("isfinite", Isfinite),
        ("real", Real),
        ("imag", Imag),
        ("conj", Conj),
        ("arg", Arg),
    ]
};

impl Func {
    /// The function of a C name, and whether the name is the `float` (`...f`) form.
    pub(crate) fn lookup(name: &str) -> Option<(Func, bool)> {
        use Func::*;
        let base = |n: &str| NAMES.iter().find(|(s, _)| *s == n).map(|&(_, f)| f);
        if let Some(f) = base(name) {
            return Some((f, false));
        }
        let f = base(name.strip_suffix('f')?)?;
        if matches!(
            f,
            Min | Max | Abs | Isnan | Isinf | Isfinite | Real | Imag | Conj | Arg
        ) {
            return None;
        }
        Some((f, true))
    }

    /// Whether the function is defined on complex arguments.
    pub(crate) fn complex(self) -> bool {
        use Func::*;
        matches!(
            self,
            Real | Imag | Conj | Arg | Abs | Exp | Log | Sqrt | Sin | Cos | Pow
        )
    }

    /// The C name as written (for messages).
    pub(crate) fn c_name(self) -> &'static str {
        NAMES.iter().find(|(_, f)| *f == self).map_or("?", |&(s, _)| s)
    }

    pub(crate) fn arity(self) -> usize {
        use Func::*;
        match self {
            Pow | Fmin | Fmax | Copysign | Atan2 | Fmod | Hypot | Min | Max => 2,
            _ => 1,
        }
    }

    /// The C name of the function in CUDA for a computation in `ty`.
    pub(crate) fn cuda_name(self, ty: ScalarType) -> String {
        use Func::*;
        let base = match self {
            Exp => "exp",
            Log => "log",
            Sqrt => "sqrt",
            Sin => "sin",
            Cos => "cos",
            Tan => "tan",
            Tanh => "tanh",
            Sinh => "sinh",
            Cosh => "cosh",
            Asin => "asin",
            Acos => "acos",
            Atan => "atan",
            Fabs => "fabs",
            Floor => "floor",
            Ceil => "ceil",
            Round => "round",
            Trunc => "trunc",
            Erf => "erf",
            Erfc => "erfc",
            Exp2 => "exp2",
            Log2 => "log2",
            Log10 => "log10",
            Log1p => "log1p",
            Expm1 => "expm1",
            Rsqrt => "rsqrt",
            Cbrt => "cbrt",
            Pow => "pow",
            Fmin => "fmin",
            Fmax => "fmax",
            Copysign => "copysign",
            Atan2 => "atan2",
            Fmod => "fmod",
            Hypot => "hypot",
            Min => {
                return if ty.is_float() {
                    if ty == ScalarType::F64 {
                        "fmin".into()
                    } else {
                        "fminf".into()
                    }
                } else {
                    "min".into()
                }
            }
            Max => {
                return if ty.is_float() {
                    if ty == ScalarType::F64 {
                        "fmax".into()
                    } else {
                        "fmaxf".into()
                    }
                } else {
                    "max".into()
                }
            }
            Abs => {
                return if ty == ScalarType::F64 {
                    "fabs".into()
                } else if ty.is_float() {
                    "fabsf".into()
                } else if ty == ScalarType::I64 {
                    "llabs".into()
                } else {
                    "abs".into()
                }
            }
            Isnan => "isnan",
            Isinf => "isinf",
            Isfinite => "isfinite",
            // Complex functions are emitted by the generator; on a real value `arg` is
            // `atan2(0, x)` and the others are the value or zero.
            Real | Imag | Conj => return String::new(),
            Arg => "atan2",
        };
        if ty == ScalarType::F64 || matches!(self, Isnan | Isinf | Isfinite) {
            base.into()
        } else {
            format!("{base}f")
        }
    }
}
