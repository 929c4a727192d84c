//! The type checker: resolves names, applies C's usual arithmetic conversions and makes every
//! implicit conversion an explicit cast, so the CUDA generator and the CPU evaluator compute
//! in exactly the same types.

use std::collections::HashMap;

use kiln_core::Error;

pub(crate) use crate::func::Func;
use crate::parse::{BinOp, Expr, ExprKind, Pos, Stmt, TypeName, UnOp};
use crate::types::{common_type, promote, ScalarType, Value};

/// A typed expression.
#[derive(Clone, Debug)]
pub(crate) struct TX {
    pub e: TE,
    pub ty: ScalarType,
}

/// Values that come from the launch rather than from a variable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Special {
    /// `i`: the flat output index.
    Index,
    /// `_ind.size()`: the number of output elements.
    Size,
    /// `_in_ind.size()` in a reduction: the number of (broadcast) input elements.
    InSize,
    /// `_out_ind.size()` in a reduction: the number of output elements.
    OutSize,
    /// `x.size()` of a raw parameter (its element count).
    RawSize(usize),
}

#[derive(Clone, Debug)]
pub(crate) enum TE {
    Const(Value),
    Var(usize),
    Special(Special),
    /// `x[idx]` of raw parameter `param` (idx is `long long`).
    RawLoad(usize, Box<TX>),
    /// `-x` or `~x`; the operand has the result type.
    Unary(UnOp, Box<TX>),
    /// `!x`; the operand is bool.
    Not(Box<TX>),
    /// Arithmetic or bitwise; both operands have the result type (for shifts too: the
    /// count is converted to the left operand's type), except that with a complex result
    /// one operand may be real, of the result's part type (`+ - * /` of a complex and a
    /// real value, computed as C++'s `complex<T>` operators do: on the parts).
    Bin(BinOp, Box<TX>, Box<TX>),
    /// Comparison; both operands have a common type, the result is bool.
    Cmp(BinOp, Box<TX>, Box<TX>),
    /// `&&`/`||` on bools.
    Logic(BinOp, Box<TX>, Box<TX>),
    /// `c ? a : b`: c bool, a and b of the result type.
    Select(Box<TX>, Box<TX>, Box<TX>),
    /// Conversion from the operand's type to this node's type.
    Cast(Box<TX>),
    /// A math function; the arguments have the function's argument types.
    Call(Func, Vec<TX>),
    /// A complex value (this node's type) from its real and imaginary parts, both of the
    /// type's part type.
    Complex(Box<TX>, Box<TX>),
}

#[derive(Clone, Debug)]
pub(crate) enum TS {
    /// Variable = value (value of the variable's type).
    Assign(usize, TX),
    /// Raw output parameter `[idx] = value`.
    RawStore(usize, TX, TX),
    If(TX, Vec<TS>, Vec<TS>),
}

/// What a variable is.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum VarKind {
    Local,
    /// A non-raw input array element (read-only).
    In(usize),
    /// A scalar input (read-only).
    Scalar(usize),
    /// A non-raw output array element.
    Out(usize),
    /// `a` / `b` of a reduction.
    Acc(u8),
}

#[derive(Clone, Debug)]
pub(crate) struct Var {
    pub name: String,
    pub ty: ScalarType,
    pub kind: VarKind,
}

/// The type environment of one kernel body.
pub(crate) struct Checker<'a> {
    pub vars: Vec<Var>,
    scopes: Vec<HashMap<String, usize>>,
    /// Raw parameters: name -> (param index, type, is output).
    raws: &'a HashMap<String, (usize, ScalarType, bool)>,
    /// Placeholder bindings.
    types: &'a HashMap<String, ScalarType>,
    /// Whether `i` / `_ind.size()` exist (element-wise) or `_in_ind`/`_out_ind` (reduction).
    reduction: bool,
    pub what: String,
    pub op: String,
}

impl<'a> Checker<'a> {
    pub(crate) fn new(
        raws: &'a HashMap<String, (usize, ScalarType, bool)>,
        types: &'a HashMap<String, ScalarType>,
        reduction: bool,
        op: &str,
    ) -> Self {
        Checker {
            vars: Vec::new(),
            scopes: vec![HashMap::new()],
            raws,
            types,
            reduction,
            what: String::new(),
            op: op.into(),
        }
    }

    /// Declares a variable in the outermost scope.
    pub(crate) fn declare(&mut self, name: &str, ty: ScalarType, kind: VarKind) -> usize {
        self.vars.push(Var {
            name: name.into(),
            ty,
            kind,
        });
        let id = self.vars.len() - 1;
        self.scopes[0].insert(name.into(), id);
        id
    }

    fn err(&self, pos: Pos, msg: impl std::fmt::Display) -> Error {
        Error::invalid(&self.op, format!("{}: {msg} at {pos}", self.what))
    }

    pub(crate) fn resolve_type(&self, t: &TypeName, pos: Pos) -> Result<ScalarType, Error> {
        match t {
            TypeName::Concrete(t) => Ok(*t),
            TypeName::Placeholder(p) => self
                .types
                .get(p)
                .copied()
                .ok_or_else(|| self.err(pos, format!("the type `{p}` is not bound by any argument"))),
        }
    }

    fn lookup(&self, name: &str) -> Option<usize> {
        self.scopes.iter().rev().find_map(|s| s.get(name).copied())
    }

    pub(crate) fn statements(&mut self, body: &[Stmt]) -> Result<Vec<TS>, Error> {
        let mut out = Vec::new();
        for s in body {
            self.statement(s, &mut out)?;
        }
        Ok(out)
    }

    fn block(&mut self, body: &[Stmt]) -> Result<Vec<TS>, Error> {
        self.scopes.push(HashMap::new());
        let r = self.statements(body);
        self.scopes.pop();
        r
    }

    fn statement(&mut self, s: &Stmt, out: &mut Vec<TS>) -> Result<(), Error> {
        match s {
            Stmt::Block(b) => out.extend(self.block(b)?),
            Stmt::If(c, t, e) => {
                let pos = c.pos;
                let c = self.expr(c)?;
                let c = self.cond(c, pos)?;
                let t = self.block(t)?;
                let e = self.block(e)?;
                out.push(TS::If(c, t, e));
            }
            Stmt::Decl { ty, vars } => {
                for (name, init, pos) in vars {
                    let t = self.resolve_type(ty, *pos)?;
                    if name == "i" && !self.reduction {
                        return Err(self.err(*pos, "`i` is the element index and cannot be declared"));
                    }
                    if self.scopes.last().is_some_and(|s| s.contains_key(name)) && self.scopes.len() > 1 {
                        return Err(self.err(*pos, format!("`{name}` is declared twice in the same block")));
                    }
                    let value = match init {
                        Some(e) => {
                            let v = self.expr(e)?;
                            self.conv(v, t, e.pos)?
                        }
                        // An uninitialised local reads as zero on both devices.
                        None => TX {
                            e: TE::Const(Value::I(0).cast(ScalarType::I64, t)),
                            ty: t,
                        },
                    };
                    self.vars.push(Var {
                        name: name.clone(),
                        ty: t,
                        kind: VarKind::Local,
                    });
                    let id = self.vars.len() - 1;
                    let depth = self.scopes.len() - 1;
                    // Outermost-scope names of parameters cannot be redeclared at top level.
                    if depth == 0 && self.scopes[0].contains_key(name) {
                        return Err(self.err(*pos, format!("`{name}` is already a parameter or variable")));
                    }
                    self.scopes[depth].insert(name.clone(), id);
                    out.push(TS::Assign(id, value));
                }
            }
            Stmt::Expr(e) => match &e.kind {
                ExprKind::Assign(op, lhs, rhs) => self.assign(*op, lhs, rhs, e.pos, out)?,
                _ => {
                    // An expression statement without effect: check it, then drop it.
                    self.expr(e)?;
                }
            },
        }
        Ok(())
    }

    fn assign(
        &mut self,
        op: Option<BinOp>,
        lhs: &Expr,
        rhs: &Expr,
        pos: Pos,
        out: &mut Vec<TS>,
    ) -> Result<(), Error> {
        if let ExprKind::Assign(..) = rhs.kind {
            return Err(self.err(
                rhs.pos,
                "chained assignment is not supported; write two statements",
            ));
        }
        let rhs_t = self.expr(rhs)?;
        match &lhs.kind {
            ExprKind::Ident(name) => {
                let Some(id) = self.lookup(name) else {
                    return Err(self.err(lhs.pos, format!("unknown variable `{name}`")));
                };
                let v = self.vars[id].clone();
                match v.kind {
                    VarKind::In(_) | VarKind::Scalar(_) => {
                        return Err(self.err(lhs.pos, format!("the input parameter `{name}` is read-only; assign to an output parameter")))
                    }
                    VarKind::Acc(_) => return Err(self.err(lhs.pos, format!("`{name}` is read-only here"))),
                    _ => {}
                }
                let cur = TX { e: TE::Var(id), ty: v.ty };
                let value = match op {
                    None => rhs_t,
                    Some(op) => self.binary(op, cur, rhs_t, pos)?,
                };
                out.push(TS::Assign(id, self.conv(value, v.ty, rhs.pos)?));
            }
            ExprKind::Index(name, idx) => {
                let Some(&(p, ty, is_out)) = self.raws.get(name) else {
                    return Err(self.err(lhs.pos, format!("`{name}` is not a raw parameter; only `raw` parameters can be indexed")));
                };
                if !is_out {
                    return Err(self.err(lhs.pos, format!("the raw input `{name}` is read-only; declare it as an output to write it")));
                }
                let idx = self.index(idx)?;
                let value = match op {
                    None => rhs_t,
                    Some(op) => {
                        let cur = TX { e: TE::RawLoad(p, Box::new(idx.clone())), ty };
                        self.binary(op, cur, rhs_t, pos)?
                    }
                };
                out.push(TS::RawStore(p, idx, self.conv(value, ty, rhs.pos)?));
            }
            _ => return Err(self.err(lhs.pos, "the left side of an assignment must be a variable, an output parameter or `x[index]` of a raw output")),
        }
        Ok(())
    }

    fn index(&mut self, e: &Expr) -> Result<TX, Error> {
        let t = self.expr(e)?;
        if !t.ty.is_int() && t.ty != ScalarType::Bool {
            return Err(self.err(e.pos, format!("an index must be an integer, not {}", t.ty)));
        }
        Ok(cast(t, ScalarType::I64))
    }

    pub(crate) fn expr(&mut self, e: &Expr) -> Result<TX, Error> {
        use ScalarType::*;
        let pos = e.pos;
        Ok(match &e.kind {
            ExprKind::Int {
                v,
                unsigned,
                long,
                hex,
            } => {
                let v = *v;
                let ty = if *unsigned {
                    if !long && v <= u32::MAX as u64 {
                        U32
                    } else {
                        U64
                    }
                } else if *long {
                    if v <= i64::MAX as u64 {
                        I64
                    } else {
                        U64
                    }
                } else if v <= i32::MAX as u64 {
                    I32
                } else if *hex && v <= u32::MAX as u64 {
                    U32
                } else if v <= i64::MAX as u64 {
                    I64
                } else {
                    U64
                };
                let val = if ty.is_unsigned() {
                    Value::U(v)
                } else {
                    Value::I(v as i64)
                };
                TX {
                    e: TE::Const(val),
                    ty,
                }
            }
            ExprKind::Float { v, single } => {
                if *single {
                    TX {
                        e: TE::Const(Value::F(*v as f32 as f64)),
                        ty: F32,
                    }
                } else {
                    TX {
                        e: TE::Const(Value::F(*v)),
                        ty: F64,
                    }
                }
            }
            ExprKind::Bool(b) => TX {
                e: TE::Const(Value::B(*b)),
                ty: Bool,
            },
            ExprKind::Ident(name) => {
                if let Some(id) = self.lookup(name) {
                    TX {
                        e: TE::Var(id),
                        ty: self.vars[id].ty,
                    }
                } else if name == "i" && !self.reduction {
                    TX {
                        e: TE::Special(Special::Index),
                        ty: I64,
                    }
                } else if let Some(c) = named_constant(name) {
                    c
                } else if self.raws.contains_key(name) {
                    return Err(self.err(
                        pos,
                        format!("`{name}` is a raw parameter: index it, e.g. `{name}[i]`"),
                    ));
                } else {
                    return Err(self.err(pos, format!("unknown name `{name}`")));
                }
            }
            ExprKind::Method(obj, m) => {
                if m != "size" {
                    return Err(self.err(pos, format!("`{obj}.{m}()` is not supported; only `.size()` is")));
                }
                let s = match obj.as_str() {
                    "_ind" if !self.reduction => Special::Size,
                    "_in_ind" if self.reduction => Special::InSize,
                    "_out_ind" if self.reduction => Special::OutSize,
                    _ => match self.raws.get(obj) {
                        Some(&(p, _, _)) => Special::RawSize(p),
                        None => {
                            return Err(self.err(
                                pos,
                                format!(
                                "`{obj}.size()`: `{obj}` is not a raw parameter or an indexer of this kernel"
                            ),
                            ))
                        }
                    },
                };
                TX {
                    e: TE::Special(s),
                    ty: I64,
                }
            }
            ExprKind::Index(name, idx) => {
                let Some(&(p, ty, _)) = self.raws.get(name) else {
                    return Err(self.err(pos, format!("`{name}` is not a raw parameter; only `raw` parameters can be indexed (a non-raw parameter already means its element at `i`)")));
                };
                let idx = self.index(idx)?;
                TX {
                    e: TE::RawLoad(p, Box::new(idx)),
                    ty,
                }
            }
            ExprKind::Unary(op, x) => {
                let x = self.expr(x)?;
                match op {
                    UnOp::Plus => {
                        let t = arith_type(x.ty);
                        cast(x, t)
                    }
                    UnOp::Neg => {
                        let t = arith_type(x.ty);
                        TX {
                            e: TE::Unary(UnOp::Neg, Box::new(cast(x, t))),
                            ty: t,
                        }
                    }
                    UnOp::BitNot => {
                        if x.ty.is_float() || x.ty.is_complex() {
                            return Err(self.err(pos, format!("`~` needs an integer operand, not {}", x.ty)));
                        }
                        let t = promote(x.ty);
                        TX {
                            e: TE::Unary(UnOp::BitNot, Box::new(cast(x, t))),
                            ty: t,
                        }
                    }
                    UnOp::Not => TX {
                        e: TE::Not(Box::new(self.cond(x, pos)?)),
                        ty: Bool,
                    },
                }
            }
            ExprKind::Binary(op, a, b) => {
                let a = self.expr(a)?;
                let b = self.expr(b)?;
                self.binary(*op, a, b, pos)?
            }
            ExprKind::Cond(c, a, b) => {
                let c = self.expr(c)?;
                let c = self.cond(c, pos)?;
                let a = self.expr(a)?;
                let b = self.expr(b)?;
                let t = if a.ty == b.ty {
                    a.ty
                } else {
                    common_type(a.ty, b.ty)
                };
                TX {
                    e: TE::Select(Box::new(c), Box::new(cast(a, t)), Box::new(cast(b, t))),
                    ty: t,
                }
            }
            ExprKind::Cast(t, x) => {
                let t = self.resolve_type(t, pos)?;
                let x = self.expr(x)?;
                self.conv(x, t, pos)?
            }
            ExprKind::Complex(t, re, im) => {
                let t = self.resolve_type(t, pos)?;
                if !t.is_complex() {
                    return Err(self.err(
                        pos,
                        format!("`{}(re, im)` needs a complex type, not {t}", t.c_name()),
                    ));
                }
                let re = self.expr(re)?;
                let re = self.conv(re, t.part(), pos)?;
                let im = self.expr(im)?;
                let im = self.conv(im, t.part(), pos)?;
                TX {
                    e: TE::Complex(Box::new(re), Box::new(im)),
                    ty: t,
                }
            }
            ExprKind::Call(name, args) => self.call(name, args, pos)?,
            ExprKind::Assign(..) => {
                return Err(self.err(
                    pos,
                    "an assignment inside an expression is not supported; write it as its own statement",
                ))
            }
        })
    }

    fn binary(&mut self, op: BinOp, a: TX, b: TX, pos: Pos) -> Result<TX, Error> {
        use BinOp::*;
        let complex = a.ty.is_complex() || b.ty.is_complex();
        Ok(match op {
            And | Or => TX {
                e: TE::Logic(op, Box::new(self.cond(a, pos)?), Box::new(self.cond(b, pos)?)),
                ty: ScalarType::Bool,
            },
            Lt | Le | Gt | Ge if complex => {
                return Err(self.err(
                    pos,
                    format!(
                        "`{}` is not defined on complex values ({} and {}): C++'s complex has no order; compare `real(z)`, `imag(z)` or `abs(z)`",
                        op.c(),
                        a.ty,
                        b.ty
                    ),
                ))
            }
            Lt | Le | Gt | Ge | Eq | Ne => {
                let t = common_type(a.ty, b.ty);
                TX {
                    e: TE::Cmp(op, Box::new(cast(a, t)), Box::new(cast(b, t))),
                    ty: ScalarType::Bool,
                }
            }
            Shl | Shr | BitAnd | BitOr | BitXor | Rem => {
                if a.ty.is_float() || b.ty.is_float() || complex {
                    return Err(self.err(
                        pos,
                        format!("`{}` needs integer operands, not {} and {}", op.c(), a.ty, b.ty),
                    ));
                }
                let t = if matches!(op, Shl | Shr) {
                    promote(a.ty)
                } else {
                    common_type(a.ty, b.ty)
                };
                TX {
                    e: TE::Bin(op, Box::new(cast(a, t)), Box::new(cast(b, t))),
                    ty: t,
                }
            }
            Add | Sub | Mul | Div => {
                let t = common_type(a.ty, b.ty);
                let real_dividend = op == Div && b.ty.is_complex();
                // A real operand of a complex operation stays real (C++'s `complex<T> op T`
                // works on the parts), except the dividend of a real divided by a complex.
                let operand = |x: TX| {
                    if t.is_complex() && !x.ty.is_complex() && !real_dividend {
                        cast(x, t.part())
                    } else {
                        cast(x, t)
                    }
                };
                TX {
                    e: TE::Bin(op, Box::new(operand(a)), Box::new(operand(b))),
                    ty: t,
                }
            }
        })
    }

    fn call(&mut self, name: &str, args: &[Expr], pos: Pos) -> Result<TX, Error> {
        use ScalarType::*;
        let Some((f, single)) = Func::lookup(name) else {
            return Err(self.err(pos, format!("unknown function `{name}` (user functions and functions outside kiln's math subset are not supported on the CPU)")));
        };
        if args.len() != f.arity() {
            return Err(self.err(
                pos,
                format!("`{name}` takes {} argument(s), {} given", f.arity(), args.len()),
            ));
        }
        let mut ta = Vec::new();
        for a in args {
            ta.push(self.expr(a)?);
        }
        if ta.iter().any(|a| a.ty.is_complex())
            || matches!(f, Func::Real | Func::Imag | Func::Conj | Func::Arg)
        {
            return self.complex_call(f, name, single, ta, pos);
        }
        // <cmath>'s overloads: float arguments stay float, double or integer ones give double.
        let float_ty = |ts: &[ScalarType]| {
            if single || ts.iter().all(|t| matches!(t, F16 | F32)) {
                F32
            } else {
                F64
            }
        };
        let tys: Vec<ScalarType> = ta.iter().map(|t| t.ty).collect();
        let (arg_t, res_t) = match f {
            Func::Min | Func::Max => {
                let t = common_type(tys[0], tys[1]);
                (t, t)
            }
            Func::Abs => {
                let t = arith_type(tys[0]);
                (t, t)
            }
            Func::Isnan | Func::Isinf | Func::Isfinite => {
                let t = float_ty(&tys);
                (t, Bool)
            }
            _ => {
                let t = float_ty(&tys);
                (t, t)
            }
        };
        let ta = ta.into_iter().map(|a| cast(a, arg_t)).collect();
        Ok(TX {
            e: TE::Call(f, ta),
            ty: res_t,
        })
    }

    /// A call with a complex argument, or of `real`/`imag`/`conj`/`arg` (which on a real
    /// value give the value, zero, the value and `atan2(0, x)`: NumPy's functions of a real).
    fn complex_call(
        &mut self,
        f: Func,
        name: &str,
        single: bool,
        ta: Vec<TX>,
        pos: Pos,
    ) -> Result<TX, Error> {
        use ScalarType::*;
        if !f.complex() {
            return Err(self.err(pos, format!("`{name}` is not defined on complex values; the complex functions are real, imag, conj, abs, arg, exp, log, sqrt, sin, cos and pow")));
        }
        if single {
            return Err(self.err(
                pos,
                format!("`{name}` takes a float; call `{}` on a complex value", f.c_name()),
            ));
        }
        let tys: Vec<ScalarType> = ta.iter().map(|t| t.ty).collect();
        let t = tys.iter().fold(tys[0], |acc, &t| common_type(acc, t));
        if !t.is_complex() {
            // `real`, `imag` or `conj` of a real value: computed in its floating type
            let ft = if matches!(tys[0], F16 | F32) { F32 } else { F64 };
            let x = cast(ta.into_iter().next().unwrap_or_else(|| zero(ft)), ft);
            return Ok(match f {
                Func::Imag => zero(ft),
                Func::Arg => TX {
                    e: TE::Call(Func::Atan2, vec![zero(ft), x]),
                    ty: ft,
                },
                _ => x,
            });
        }
        let res_t = match f {
            Func::Real | Func::Imag | Func::Abs | Func::Arg => t.part(),
            _ => t,
        };
        // `pow(z, x)` keeps a real exponent real (`exp(x * log(z))` on the parts)
        let ta = ta
            .into_iter()
            .enumerate()
            .map(|(k, a)| {
                if f == Func::Pow && k == 1 && !a.ty.is_complex() {
                    cast(a, t.part())
                } else {
                    cast(a, t)
                }
            })
            .collect();
        Ok(TX {
            e: TE::Call(f, ta),
            ty: res_t,
        })
    }

    /// `x` converted to `t`, refused from a complex to a real type: C++'s `complex` has no
    /// such conversion, and which part (or the modulus) is meant is the caller's to say.
    pub(crate) fn conv(&self, x: TX, t: ScalarType, pos: Pos) -> Result<TX, Error> {
        if x.ty.is_complex() && !t.is_complex() {
            return Err(self.err(pos, format!("a {} value cannot be converted to {t} (C++'s complex has no such conversion); take `real(z)`, `imag(z)` or `abs(z)`", x.ty)));
        }
        Ok(cast(x, t))
    }

    /// `x` as a condition (`x != 0`); refused for a complex value, which C++'s `complex`
    /// does not convert to `bool`.
    fn cond(&self, x: TX, pos: Pos) -> Result<TX, Error> {
        if x.ty.is_complex() {
            return Err(self.err(
                pos,
                format!(
                    "a {} value cannot be a condition; compare it, e.g. `z != 0`",
                    x.ty
                ),
            ));
        }
        Ok(to_bool(x))
    }
}

/// Zero of a real type.
fn zero(t: ScalarType) -> TX {
    TX {
        e: TE::Const(Value::I(0).cast(ScalarType::I64, t)),
        ty: t,
    }
}

/// The type an arithmetic unary operator computes in: integers promote, floats stay.
fn arith_type(t: ScalarType) -> ScalarType {
    if t.is_float() || t.is_complex() {
        t
    } else {
        promote(t)
    }
}

/// `x` converted to `t` (a no-op when it already is; constants fold).
pub(crate) fn cast(x: TX, t: ScalarType) -> TX {
    if x.ty == t {
        return x;
    }
    if let TE::Const(v) = x.e {
        return TX {
            e: TE::Const(v.cast(x.ty, t)),
            ty: t,
        };
    }
    TX {
        e: TE::Cast(Box::new(x)),
        ty: t,
    }
}

/// `x != 0` as bool.
pub(crate) fn to_bool(x: TX) -> TX {
    cast(x, ScalarType::Bool)
}

fn named_constant(name: &str) -> Option<TX> {
    use ScalarType::*;
    let (v, t) = match name {
        "INFINITY" | "CUDART_INF_F" | "HUGE_VALF" => (f64::INFINITY, F32),
        "CUDART_INF" | "HUGE_VAL" => (f64::INFINITY, F64),
        "NAN" | "CUDART_NAN_F" => (f64::NAN, F32),
        "CUDART_NAN" => (f64::NAN, F64),
        "M_PI" | "CUDART_PI" => (std::f64::consts::PI, F64),
        "CUDART_PI_F" => (std::f64::consts::PI as f32 as f64, F32),
        "M_E" => (std::f64::consts::E, F64),
        "INT_MAX" => {
            return Some(TX {
                e: TE::Const(Value::I(i32::MAX as i64)),
                ty: I32,
            })
        }
        "INT_MIN" => {
            return Some(TX {
                e: TE::Const(Value::I(i32::MIN as i64)),
                ty: I32,
            })
        }
        "FLT_MAX" => (f32::MAX as f64, F32),
        "DBL_MAX" => (f64::MAX, F64),
        _ => return None,
    };
    Some(TX {
        e: TE::Const(Value::F(v)),
        ty: t,
    })
}
