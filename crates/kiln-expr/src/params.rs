//! Parameter lists (`"T x, raw float32 y"`), placeholder binding and broadcasting, with
//! CuPy's rules and messages.

use std::collections::{BTreeMap, HashMap};

use kiln_core::Error;

use crate::types::ScalarType;

/// The declared type of a parameter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ParamType {
    /// A concrete type (`float32`, `double`, `unsigned int`, ...).
    Concrete(ScalarType),
    /// A placeholder (`T`, `U`, ...) bound from the arguments at call time.
    Placeholder(String),
}

/// One parameter of a kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Param {
    /// Its name in the body.
    pub name: String,
    /// Its declared type.
    pub ty: ParamType,
    /// `raw`: the body indexes it (`x[j]`) instead of seeing the element at `i`.
    pub raw: bool,
}

fn is_ident(s: &str) -> bool {
    let mut c = s.chars();
    c.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && c.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Whether `name` is a valid kernel (C identifier) name.
pub fn is_valid_kernel_name(name: &str) -> bool {
    is_ident(name)
}

/// Parses a comma-separated parameter list.
pub fn parse_params(s: &str, op: &str) -> Result<Vec<Param>, Error> {
    let mut out: Vec<Param> = Vec::new();
    if s.trim().is_empty() {
        return Ok(out);
    }
    for part in s.split(',') {
        let words: Vec<&str> = part.split_whitespace().collect();
        if words.len() < 2 {
            return Err(Error::invalid(
                op,
                format!(
                    "Syntax error: `{}`: a parameter is `[raw] TYPE NAME`",
                    part.trim()
                ),
            ));
        }
        let name = words[words.len() - 1];
        let mut raw = false;
        let mut k = 0;
        while k < words.len() - 2 && matches!(words[k], "raw" | "_non_const" | "const") {
            raw |= words[k] == "raw";
            k += 1;
        }
        let ty_words = &words[k..words.len() - 1];
        let joined = ty_words.join(" ");
        let ty = match ScalarType::from_name(&joined)? {
            Some(t) => ParamType::Concrete(t),
            None if ty_words.len() == 1 && is_ident(&joined) => ParamType::Placeholder(joined),
            None => {
                let unknown = ty_words.iter().find(|w| {
                    matches!(ScalarType::from_name(w), Ok(None))
                        && !matches!(**w, "unsigned" | "signed" | "long" | "short" | "int" | "char")
                });
                return Err(Error::invalid(
                    op,
                    match unknown {
                        Some(w) if ty_words.len() > 1 => {
                            format!("Unknown keyword \"{w}\" in the parameter `{}`", part.trim())
                        }
                        _ => format!("unknown type `{joined}` in the parameter `{}`", part.trim()),
                    },
                ));
            }
        };
        if !is_ident(name) {
            return Err(Error::invalid(
                op,
                format!("`{name}` is not a valid parameter name"),
            ));
        }
        if name == "i" {
            return Err(Error::invalid(op, "Can not use 'i' as a parameter name"));
        }
        if out.iter().any(|p| p.name == name) {
            return Err(Error::invalid(
                op,
                format!("the parameter name `{name}` is used twice"),
            ));
        }
        out.push(Param {
            name: name.into(),
            ty,
            raw,
        });
    }
    Ok(out)
}

/// What a caller passes for a parameter, as far as typing and shapes go.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ArgSpec {
    /// An array of this dtype and shape.
    Array {
        /// Element type.
        dtype: ScalarType,
        /// Shape.
        shape: Vec<usize>,
    },
    /// A scalar of this type (converted to the parameter's type with C's rules).
    Scalar(ScalarType),
}

/// The result of binding a kernel's parameters to its arguments.
#[derive(Clone, Debug, PartialEq)]
pub struct Binding {
    /// Each placeholder's type.
    pub types: BTreeMap<String, ScalarType>,
    /// The type of every parameter (inputs, then outputs).
    pub param_types: Vec<ScalarType>,
    /// Which inputs are scalars (outputs are always arrays).
    pub scalar: Vec<bool>,
    /// The loop (element-wise) or broadcast input (reduction) shape.
    pub shape: Vec<usize>,
    /// Every given non-raw array's shape (inputs then outputs; `None` for raw, scalar or not
    /// given), for strides.
    pub(crate) shapes: Vec<Option<Vec<usize>>>,
}

impl Binding {
    /// The placeholder map as the type checker wants it.
    pub(crate) fn type_map(&self) -> HashMap<String, ScalarType> {
        self.types.iter().map(|(k, v)| (k.clone(), *v)).collect()
    }
    /// Number of loop elements.
    pub fn size(&self) -> usize {
        self.shape.iter().product()
    }
}

/// NumPy broadcasting of `shapes`; the error names all shapes.
pub fn broadcast_shapes(shapes: &[&[usize]], op: &str) -> Result<Vec<usize>, Error> {
    let nd = shapes.iter().map(|s| s.len()).max().unwrap_or(0);
    let mut out = vec![1usize; nd];
    for s in shapes {
        for (k, &n) in s.iter().enumerate() {
            let o = &mut out[nd - s.len() + k];
            if *o == 1 {
                *o = n;
            } else if n != 1 && n != *o {
                let list: Vec<String> = shapes.iter().map(|s| format!("{s:?}")).collect();
                return Err(Error::invalid(
                    op,
                    format!(
                        "operands could not be broadcast together with shapes {}",
                        list.join(" ")
                    ),
                ));
            }
        }
    }
    Ok(out)
}

/// Decides every parameter's type as CuPy does: outputs given, then input arrays, bind the
/// placeholders (all uses of a placeholder must agree); a placeholder no array binds takes
/// the type of the first scalar passed for it.
pub(crate) fn decide_types(
    ins: &[Param],
    outs: &[Param],
    in_args: &[ArgSpec],
    out_args: &[ArgSpec],
    op: &str,
) -> Result<(BTreeMap<String, ScalarType>, Vec<ScalarType>), Error> {
    let mut map: BTreeMap<String, (ScalarType, String)> = BTreeMap::new();
    let check = |p: &Param,
                 t: ScalarType,
                 map: &mut BTreeMap<String, (ScalarType, String)>|
     -> Result<(), Error> {
        match &p.ty {
            ParamType::Concrete(c) => {
                if *c != t {
                    return Err(Error::invalid(op, format!("Type is mismatched: the parameter `{}` is declared {c} but the array passed has dtype {t}", p.name)));
                }
            }
            ParamType::Placeholder(ph) => {
                if let Some((b, by)) = map.get(ph) {
                    if *b != t {
                        return Err(Error::invalid(op, format!("Type is mismatched: `{ph}` is {b} from the parameter `{by}` but the parameter `{}` got {t}", p.name)));
                    }
                } else {
                    map.insert(ph.clone(), (t, p.name.clone()));
                }
            }
        }
        Ok(())
    };
    for (p, a) in outs.iter().zip(out_args) {
        match a {
            ArgSpec::Array { dtype, .. } => check(p, *dtype, &mut map)?,
            ArgSpec::Scalar(_) => {
                return Err(Error::invalid(
                    op,
                    format!("Output arguments must be arrays: `{}` got a scalar", p.name),
                ))
            }
        }
    }
    for (p, a) in ins.iter().zip(in_args) {
        if let ArgSpec::Array { dtype, .. } = a {
            check(p, *dtype, &mut map)?;
        }
    }
    for (p, a) in ins.iter().zip(in_args) {
        if matches!(a, ArgSpec::Scalar(_)) && p.raw {
            // the body indexes a raw parameter (`x[j]`): a scalar has no elements to index,
            // whatever the parameter's declared type
            return Err(Error::invalid(
                op,
                format!("the raw parameter `{}` needs an array, not a scalar", p.name),
            ));
        }
        if let (ArgSpec::Scalar(t), ParamType::Placeholder(ph)) = (a, &p.ty) {
            map.entry(ph.clone()).or_insert((*t, p.name.clone()));
        }
    }
    let mut types = Vec::new();
    for p in ins.iter().chain(outs) {
        types.push(match &p.ty {
            ParamType::Concrete(c) => *c,
            ParamType::Placeholder(ph) => match map.get(ph) {
                Some((t, _)) => *t,
                None => return Err(Error::invalid(op, format!("the type `{ph}` of the parameter `{}` cannot be decided: no argument binds it; pass an array for it (or the output array)", p.name))),
            },
        });
    }
    Ok((map.into_iter().map(|(k, (t, _))| (k, t)).collect(), types))
}
