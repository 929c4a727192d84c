//! CUDA C++ source generation from the typed AST.
//!
//! Every implicit conversion is explicit in the emitted code, so the GPU computes in exactly
//! the types the CPU evaluator does. Half values are held in `float` registers, rounded to
//! half after every half-typed operation (PTX `cvt`, no `cuda_fp16.h`: NVRTC installs without
//! it), and stored as their bits (`unsigned short`).
//!
//! Shapes and strides are kernel parameters, not constants: one compiled kernel serves every
//! shape of the same rank, dtypes and contiguity (what a module cache keys on), and the cost
//! is a few integer divisions per element for non-contiguous operands only. Only the rank,
//! the contiguity of each operand and the index width are baked in. One thread per output
//! element, grid-stride loop; the loop index is 32-bit when the loop has fewer than 2^31
//! elements (faster division), offsets are always 64-bit.

use std::fmt::Write;

use crate::cuda_complex as cx;
use crate::elementwise::Typed;
use crate::params::{Binding, Param};
use crate::parse::UnOp;
use crate::typed::{Func, Special, Var, VarKind, TE, TS, TX};
use crate::types::{ScalarType, Value};

/// One parameter of a generated kernel, in launch order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KernelParam {
    /// A device pointer to element `[0, ...]` of the named array (`const` for inputs); half
    /// arrays are passed as their 16-bit storage.
    Array {
        /// The kernel parameter.
        name: String,
        /// Element type.
        dtype: ScalarType,
        /// Whether the kernel writes it.
        output: bool,
    },
    /// A scalar by value, in the C type of `dtype` (`float` for half: the half value; for
    /// a complex type its real part, in the part's C type: [`crate::Scalar::real`]).
    Scalar {
        /// The kernel parameter.
        name: String,
        /// Its type.
        dtype: ScalarType,
    },
    /// The imaginary part of the complex scalar `name` (the parameter after its real part),
    /// in the C type of `dtype`'s part: [`crate::Scalar::imag`] of the scalar converted to
    /// `dtype`.
    ScalarImag {
        /// The kernel parameter.
        name: String,
        /// Its (complex) type.
        dtype: ScalarType,
    },
    /// `long long`: the number of loop elements (element-wise) or of output elements
    /// (reduction).
    Size,
    /// `long long`: the number of elements reduced into each output (reduction only).
    ReduceSize,
    /// `long long`: the extent of loop axis `axis` (reduction: output axes, then reduced).
    Extent {
        /// The axis.
        axis: usize,
    },
    /// `long long`: the named array's stride in elements along loop axis `axis` (0 where it
    /// is broadcast).
    Stride {
        /// The array parameter.
        name: String,
        /// The loop axis.
        axis: usize,
    },
    /// `long long`: the element count of the named raw array.
    RawLen {
        /// The raw parameter.
        name: String,
    },
}

/// Block size the reduction kernels are written for (`blockDim.x` must equal it).
pub const REDUCTION_BLOCK: u32 = 256;

pub(crate) const HALF_HELPERS: &str = r#"__device__ __forceinline__ float _kiln_h2f(unsigned short h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
__device__ __forceinline__ unsigned short _kiln_f2h(float f) { unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
__device__ __forceinline__ unsigned short _kiln_d2h(double d) { unsigned short h; asm("cvt.rn.f16.f64 %0, %1;" : "=h"(h) : "d"(d)); return h; }
__device__ __forceinline__ float _kiln_r16(float f) { return _kiln_h2f(_kiln_f2h(f)); }
__device__ __forceinline__ float _kiln_d2r16(double d) { return _kiln_h2f(_kiln_d2h(d)); }
// Float to unsigned as the CPU evaluator converts: negative values through the signed range.
template <class T, class F> __device__ __forceinline__ T _kiln_f2u(F v) { return v >= 0 ? (T)v : (T)(long long)v; }
"#;

/// How an operand of the loop is addressed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Addr {
    /// Element `_i`.
    Contiguous,
    /// Element 0 (every stride 0).
    Uniform,
    /// Through the strides.
    Strided,
}

pub(crate) fn addr_of(shape: &[usize], arg_shape: &[usize]) -> Addr {
    let nd = shape.len();
    let off = nd - arg_shape.len().min(nd);
    let st: Vec<isize> = (0..nd)
        .map(|j| if j < off || arg_shape[j - off] == 1 { 0 } else { 1 })
        .collect();
    if shape.iter().zip(&st).all(|(&n, &s)| n <= 1 || s == 0) {
        return Addr::Uniform;
    }
    // Contiguous when the array is the whole loop in C order (its strides are checked by the
    // launcher, which passes them; here: same extents, no broadcast).
    if arg_shape.len() == nd && arg_shape == shape {
        return Addr::Contiguous;
    }
    Addr::Strided
}

pub(crate) fn lit(v: Value, t: ScalarType) -> String {
    use ScalarType::*;
    match t {
        C64 | C128 => crate::cuda_complex::constant(v, t),
        Bool => (if v.as_bool() { "true" } else { "false" }).into(),
        I8 | I16 | U8 | U16 => format!("(({}){})", t.c_name(), v.as_i64()),
        I32 => {
            let x = v.as_i64() as i32;
            if x == i32::MIN {
                "(-2147483647 - 1)".into()
            } else if x < 0 {
                format!("({x})")
            } else {
                format!("{x}")
            }
        }
        I64 => {
            let x = v.as_i64();
            if x == i64::MIN {
                "(-9223372036854775807LL - 1LL)".into()
            } else if x < 0 {
                format!("({x}LL)")
            } else {
                format!("{x}LL")
            }
        }
        U32 => format!("{}u", v.as_u64() as u32),
        U64 => format!("{}ull", v.as_u64()),
        F16 | F32 => {
            let x = v.as_f64() as f32;
            if x.is_finite() {
                format!("{x:?}f").replace("inf", "INF")
            } else {
                format!("__int_as_float(0x{:08x})", x.to_bits())
            }
        }
        F64 => {
            let x = v.as_f64();
            if x.is_finite() {
                format!("{x:?}")
            } else {
                format!("__longlong_as_double(0x{:016x}LL)", x.to_bits())
            }
        }
    }
}

pub(crate) fn var_name(vars: &[Var], id: usize) -> String {
    let v = &vars[id];
    match v.kind {
        VarKind::Local => format!("_l{id}_{}", v.name),
        _ => v.name.clone(),
    }
}

pub(crate) struct Emit<'a> {
    pub vars: &'a [Var],
    /// Parameter names by parameter index.
    pub names: &'a [String],
    /// Parameter types by parameter index.
    pub raw_types: &'a [ScalarType],
}

impl Emit<'_> {
    pub(crate) fn expr(&self, x: &TX) -> String {
        use ScalarType::*;
        let r16 = |s: String| if x.ty == F16 { format!("_kiln_r16({s})") } else { s };
        match &x.e {
            TE::Const(v) => lit(*v, x.ty),
            TE::Var(id) => var_name(self.vars, *id),
            TE::Special(s) => match s {
                Special::Index => "i".into(),
                Special::Size => "_ind_size".into(),
                Special::InSize => "_in_size".into(),
                Special::OutSize => "_out_size".into(),
                Special::RawSize(p) => format!("_len_{}", self.names[*p]),
            },
            TE::RawLoad(p, idx) => {
                let s = format!("_p_{}[{}]", self.names[*p], self.expr(idx));
                if self.raw_types[*p] == F16 {
                    format!("_kiln_h2f({s})")
                } else {
                    s
                }
            }
            TE::Unary(op, a) if x.ty.is_complex() => {
                let _ = op;
                cx::neg(x.ty, &self.expr(a))
            }
            TE::Unary(op, a) => {
                let o = if *op == UnOp::Neg { "-" } else { "~" };
                r16(format!("({o}{})", self.expr(a)))
            }
            TE::Not(a) => format!("(!{})", self.expr(a)),
            TE::Bin(op, a, b) if x.ty.is_complex() => cx::bin(
                *op,
                x.ty,
                (self.expr(a), a.ty.is_complex()),
                (self.expr(b), b.ty.is_complex()),
            ),
            TE::Bin(op, a, b) => r16(format!("({} {} {})", self.expr(a), op.c(), self.expr(b))),
            TE::Cmp(op, a, b) if a.ty.is_complex() => cx::cmp(*op, a.ty, &self.expr(a), &self.expr(b)),
            TE::Complex(re, im) => cx::make(x.ty, &self.expr(re), &self.expr(im)),
            TE::Cmp(op, a, b) | TE::Logic(op, a, b) => {
                format!("({} {} {})", self.expr(a), op.c(), self.expr(b))
            }
            TE::Select(c, a, b) => format!("({} ? {} : {})", self.expr(c), self.expr(a), self.expr(b)),
            TE::Cast(a) => self.cast(a, x.ty),
            TE::Call(f, args) => {
                let at = args[0].ty;
                let a: Vec<String> = args.iter().map(|a| self.expr(a)).collect();
                if at.is_complex() {
                    let real_exp = args.get(1).is_some_and(|b| !b.ty.is_complex());
                    return cx::call(*f, at, &a, real_exp);
                }
                let s = match f {
                    Func::Min | Func::Max if !at.is_float() => {
                        let base = if *f == Func::Min { "min" } else { "max" };
                        let pre = match at {
                            U32 => "u",
                            I64 => "ll",
                            U64 => "ull",
                            _ => "",
                        };
                        format!("{pre}{base}({}, {})", a[0], a[1])
                    }
                    Func::Abs if at.is_unsigned() => a[0].clone(),
                    _ => format!("{}({})", f.cuda_name(at), a.join(", ")),
                };
                r16(s)
            }
        }
    }

    fn cast(&self, a: &TX, to: ScalarType) -> String {
        use ScalarType::*;
        let s = self.expr(a);
        let from = a.ty;
        match to {
            C64 | C128 => {
                let p = to.part().c_name();
                if from.is_complex() {
                    format!("{}_from({s})", to.c_name())
                } else {
                    cx::make(to, &format!("(({p})({s}))"), &format!("(({p})0)"))
                }
            }
            Bool => format!("((bool)({s}))"),
            F16 => {
                if matches!(from, F16 | F32) {
                    format!("_kiln_r16((float)({s}))")
                } else {
                    format!("_kiln_d2r16((double)({s}))")
                }
            }
            _ if from.is_float() && to.is_int() => {
                let c = to.c_name();
                match to {
                    I8 | I16 | U8 | U16 => format!("(({c})(int)({s}))"),
                    U32 | U64 => format!("_kiln_f2u<{c}>({s})"),
                    _ => format!("(({c})({s}))"),
                }
            }
            _ => format!("(({})({s}))", to.c_name()),
        }
    }

    pub(crate) fn stmts(&self, ss: &[TS], ind: usize, out: &mut String) {
        let pad = "  ".repeat(ind);
        for s in ss {
            match s {
                TS::Assign(id, x) => {
                    let _ = writeln!(out, "{pad}{} = {};", var_name(self.vars, *id), self.expr(x));
                }
                TS::RawStore(p, idx, v) => {
                    let val = self.expr(v);
                    let val = if self.raw_types[*p] == ScalarType::F16 {
                        format!("_kiln_f2h({val})")
                    } else {
                        val
                    };
                    let _ = writeln!(out, "{pad}_p_{}[{}] = {val};", self.names[*p], self.expr(idx));
                }
                TS::If(c, t, e) => {
                    let _ = writeln!(out, "{pad}if ({}) {{", self.expr(c));
                    self.stmts(t, ind + 1, out);
                    if e.is_empty() {
                        let _ = writeln!(out, "{pad}}}");
                    } else {
                        let _ = writeln!(out, "{pad}}} else {{");
                        self.stmts(e, ind + 1, out);
                        let _ = writeln!(out, "{pad}}}");
                    }
                }
            }
        }
    }
}

/// Whether a statement list reads variable `id`, and whether it assigns it under a condition.
pub(crate) fn var_use(ss: &[TS], id: usize, cond: bool, reads: &mut bool, cond_writes: &mut bool) {
    fn ex(x: &TX, id: usize) -> bool {
        match &x.e {
            TE::Var(v) => *v == id,
            TE::Const(_) | TE::Special(_) => false,
            TE::RawLoad(_, a) | TE::Unary(_, a) | TE::Not(a) | TE::Cast(a) => ex(a, id),
            TE::Bin(_, a, b) | TE::Cmp(_, a, b) | TE::Logic(_, a, b) | TE::Complex(a, b) => {
                ex(a, id) || ex(b, id)
            }
            TE::Select(c, a, b) => ex(c, id) || ex(a, id) || ex(b, id),
            TE::Call(_, args) => args.iter().any(|a| ex(a, id)),
        }
    }
    for s in ss {
        match s {
            TS::Assign(v, x) => {
                *reads |= ex(x, id);
                *cond_writes |= cond && *v == id;
            }
            TS::RawStore(_, a, b) => *reads |= ex(a, id) || ex(b, id),
            TS::If(c, t, e) => {
                *reads |= ex(c, id);
                var_use(t, id, true, reads, cond_writes);
                var_use(e, id, true, reads, cond_writes);
            }
        }
    }
}

/// Whether a statement list assigns variable `id`.
pub(crate) fn assigns(ss: &[TS], id: usize) -> bool {
    ss.iter().any(|s| match s {
        TS::Assign(v, _) => *v == id,
        TS::RawStore(..) => false,
        TS::If(_, t, e) => assigns(t, id) || assigns(e, id),
    })
}

/// The initialiser of a local variable (zero; `{}` for a complex struct).
pub(crate) fn zero_init(t: ScalarType) -> &'static str {
    if t.is_complex() {
        "{}"
    } else {
        "0"
    }
}

/// The C type of a kernel parameter for a scalar of type `t`.
pub(crate) fn scalar_c(t: ScalarType) -> &'static str {
    t.c_name()
}

/// Index type of a loop of `n` elements.
pub(crate) fn index_type(n: usize) -> &'static str {
    if n < (1usize << 31) {
        "unsigned int"
    } else {
        "unsigned long long"
    }
}

/// The parameters of an element-wise kernel, in order.
pub(crate) fn elementwise_params(ins: &[Param], outs: &[Param], b: &Binding) -> Vec<KernelParam> {
    let nin = ins.len();
    let mut v = Vec::new();
    let mut strided = Vec::new();
    for (k, p) in ins.iter().chain(outs).enumerate() {
        let t = b.param_types[k];
        if k < nin && b.scalar[k] {
            v.push(KernelParam::Scalar {
                name: p.name.clone(),
                dtype: t,
            });
            if t.is_complex() {
                v.push(KernelParam::ScalarImag {
                    name: p.name.clone(),
                    dtype: t,
                });
            }
            continue;
        }
        v.push(KernelParam::Array {
            name: p.name.clone(),
            dtype: t,
            output: k >= nin,
        });
        if !p.raw {
            let shape = b
                .shapes
                .get(k)
                .cloned()
                .flatten()
                .unwrap_or_else(|| b.shape.clone());
            if addr_of(&b.shape, &shape) == Addr::Strided {
                strided.push(p.name.clone());
            }
        }
    }
    v.push(KernelParam::Size);
    if !strided.is_empty() {
        for axis in 0..b.shape.len() {
            v.push(KernelParam::Extent { axis });
        }
        for name in strided {
            for axis in 0..b.shape.len() {
                v.push(KernelParam::Stride {
                    name: name.clone(),
                    axis,
                });
            }
        }
    }
    for p in ins.iter().chain(outs) {
        if p.raw {
            v.push(KernelParam::RawLen { name: p.name.clone() });
        }
    }
    v
}

/// The C declaration of each kernel parameter.
pub(crate) fn param_decls(params: &[KernelParam], raw: &[String]) -> String {
    let mut d = Vec::new();
    for p in params {
        d.push(match p {
            KernelParam::Array { name, dtype, output } => {
                let restrict = if raw.contains(name) { "" } else { " __restrict__" };
                let c = if *output { "" } else { "const " };
                if dtype.is_complex() {
                    // its parts; re-typed by `cuda_complex::param_aliases`
                    format!("{c}{}*{restrict} _pc_{name}", dtype.part().c_name())
                } else {
                    format!("{c}{}*{restrict} _p_{name}", dtype.c_storage_name())
                }
            }
            KernelParam::Scalar { name, dtype } if dtype.is_complex() => {
                format!("const {} _sr_{name}", dtype.part().c_name())
            }
            KernelParam::ScalarImag { name, dtype } => format!("const {} _si_{name}", dtype.part().c_name()),
            KernelParam::Scalar { name, dtype } => format!("const {} {name}", scalar_c(*dtype)),
            KernelParam::Size => "const long long _n".into(),
            KernelParam::ReduceSize => "const long long _red_n".into(),
            KernelParam::Extent { axis } => format!("const long long _ext{axis}"),
            KernelParam::Stride { name, axis } => format!("const long long _st_{name}_{axis}"),
            KernelParam::RawLen { name } => format!("const long long _len_{name}"),
        });
    }
    d.join(",\n    ")
}

/// `_c0.._c{nd-1}`: the multi-index of flat index `flat` over the `_ext` extents.
pub(crate) fn unravel(flat: &str, nd: usize, idx: &str, pad: &str, out: &mut String) {
    let _ = writeln!(out, "{pad}{idx} _u = {flat};");
    for k in (1..nd).rev() {
        let _ = writeln!(
            out,
            "{pad}const long long _c{k} = (long long)(_u % ({idx})_ext{k}); _u /= ({idx})_ext{k};"
        );
    }
    if nd > 0 {
        let _ = writeln!(out, "{pad}const long long _c0 = (long long)_u;");
    }
}

/// The element offset of an operand addressed `a` (strided operands: through `_st_NAME_k`).
pub(crate) fn offset_expr(a: Addr, name: &str, nd: usize, flat: &str) -> String {
    match a {
        Addr::Contiguous => flat.to_string(),
        Addr::Uniform => "0".into(),
        Addr::Strided => {
            let terms: Vec<String> = (0..nd).map(|k| format!("_c{k} * _st_{name}_{k}")).collect();
            format!("({})", terms.join(" + "))
        }
    }
}

pub(crate) fn load_expr(t: ScalarType, ptr: &str) -> String {
    if t == ScalarType::F16 {
        format!("_kiln_h2f({ptr})")
    } else {
        ptr.to_string()
    }
}

pub(crate) fn store_expr(t: ScalarType, v: &str) -> String {
    if t == ScalarType::F16 {
        format!("_kiln_f2h({v})")
    } else {
        v.to_string()
    }
}

/// The element-wise kernel's source.
pub(crate) fn elementwise_source(
    name: &str,
    ins: &[Param],
    outs: &[Param],
    b: &Binding,
    t: &Typed,
    preamble: &str,
) -> String {
    let params = elementwise_params(ins, outs, b);
    let names: Vec<String> = ins.iter().chain(outs).map(|p| p.name.clone()).collect();
    let raw: Vec<String> = ins
        .iter()
        .chain(outs)
        .filter(|p| p.raw)
        .map(|p| p.name.clone())
        .collect();
    let nd = b.shape.len();
    let idx = index_type(b.size());
    let strided = params.iter().any(|p| matches!(p, KernelParam::Stride { .. }));
    let mut s = String::new();
    let _ = writeln!(
        s,
        "// kiln-expr element-wise kernel `{name}`: one thread per element, grid-stride loop."
    );
    s.push_str(HALF_HELPERS);
    if cx::uses_complex(&b.param_types) {
        s.push_str(&cx::helpers());
    }
    if !preamble.is_empty() {
        s.push_str(preamble);
        s.push('\n');
    }
    let _ = writeln!(
        s,
        "extern \"C\" __global__ void {name}(\n    {}) {{",
        param_decls(&params, &raw)
    );
    s.push_str(&cx::param_aliases(&params, "  "));
    let _ = writeln!(s, "  const long long _ind_size = _n;");
    let _ = writeln!(s, "  for ({idx} _i = ({idx})blockIdx.x * blockDim.x + threadIdx.x; _i < ({idx})_n; _i += ({idx})gridDim.x * blockDim.x) {{");
    let _ = writeln!(s, "    const long long i = (long long)_i;");
    let _ = writeln!(s, "    (void)i; (void)_ind_size;");
    if strided {
        unravel("_i", nd, idx, "    ", &mut s);
    }
    let e = Emit {
        vars: &t.vars,
        names: &names,
        raw_types: &b.param_types,
    };
    let nin = ins.len();
    let mut stores = Vec::new();
    for (id, v) in t.vars.iter().enumerate() {
        match v.kind {
            VarKind::In(k) => {
                let shape = b
                    .shapes
                    .get(k)
                    .cloned()
                    .flatten()
                    .unwrap_or_else(|| b.shape.clone());
                let off = offset_expr(addr_of(&b.shape, &shape), &v.name, nd, "_i");
                let _ = writeln!(
                    s,
                    "    const {} {} = {};",
                    v.ty.c_name(),
                    v.name,
                    load_expr(v.ty, &format!("_p_{}[{off}]", v.name))
                );
            }
            VarKind::Out(k) => {
                let shape = b
                    .shapes
                    .get(k)
                    .cloned()
                    .flatten()
                    .unwrap_or_else(|| b.shape.clone());
                let off = offset_expr(addr_of(&b.shape, &shape), &v.name, nd, "_i");
                let (mut reads, mut cw) = (false, false);
                var_use(&t.body, id, false, &mut reads, &mut cw);
                if reads || cw {
                    let _ = writeln!(
                        s,
                        "    {} {} = {};",
                        v.ty.c_name(),
                        v.name,
                        load_expr(v.ty, &format!("_p_{}[{off}]", v.name))
                    );
                } else {
                    let _ = writeln!(s, "    {} {};", v.ty.c_name(), v.name);
                }
                if assigns(&t.body, id) {
                    stores.push(format!(
                        "    _p_{}[{off}] = {};",
                        v.name,
                        store_expr(v.ty, &v.name)
                    ));
                }
                let _ = k >= nin;
            }
            VarKind::Local => {
                let _ = writeln!(
                    s,
                    "    {} {} = {};",
                    v.ty.c_name(),
                    var_name(&t.vars, id),
                    zero_init(v.ty)
                );
            }
            VarKind::Scalar(_) | VarKind::Acc(_) => {}
        }
    }
    e.stmts(&t.body, 2, &mut s);
    for st in stores {
        let _ = writeln!(s, "{st}");
    }
    s.push_str("  }\n}\n");
    if let Some(plan) = crate::cuda_vector::plan(name, ins, outs, b) {
        s.push_str(&crate::cuda_vector::source(&plan, &params, ins, outs, b, t));
    }
    s
}

/// CuPy's emission of a body kiln does not compile: the text as written, with its names
/// bound as CuPy binds them. `Err` says why even that is impossible.
pub(crate) fn elementwise_verbatim(
    name: &str,
    ins: &[Param],
    outs: &[Param],
    b: &Binding,
    operation: &str,
    preamble: &str,
) -> Result<String, String> {
    if b.param_types.contains(&ScalarType::F16) {
        return Err(
            "float16 parameters need a body within kiln's C subset (verbatim CUDA has no half type here)"
                .into(),
        );
    }
    if let Some(t) = b.param_types.iter().find(|t| t.is_complex()) {
        return Err(format!(
            "{t} parameters need a body within kiln's C subset (verbatim CUDA has no complex type here)"
        ));
    }
    let params = elementwise_params(ins, outs, b);
    let raw: Vec<String> = ins
        .iter()
        .chain(outs)
        .filter(|p| p.raw)
        .map(|p| p.name.clone())
        .collect();
    let nd = b.shape.len();
    let idx = index_type(b.size());
    let strided = params.iter().any(|p| matches!(p, KernelParam::Stride { .. }));
    let nin = ins.len();
    let mut s = String::new();
    let _ = writeln!(
        s,
        "// kiln-expr element-wise kernel `{name}` (body emitted verbatim)."
    );
    for (ph, t) in &b.types {
        let _ = writeln!(s, "typedef {} {ph};", t.c_name());
    }
    s.push_str("struct _kiln_indexer { long long n; __device__ long long size() const { return n; } };\n");
    if !preamble.is_empty() {
        s.push_str(preamble);
        s.push('\n');
    }
    let _ = writeln!(
        s,
        "extern \"C\" __global__ void {name}(\n    {}) {{",
        param_decls(&params, &raw)
    );
    let _ = writeln!(s, "  const _kiln_indexer _ind = {{_n}};");
    let _ = writeln!(s, "  for ({idx} _i = ({idx})blockIdx.x * blockDim.x + threadIdx.x; _i < ({idx})_n; _i += ({idx})gridDim.x * blockDim.x) {{");
    let _ = writeln!(s, "    const ptrdiff_t i = (ptrdiff_t)_i;");
    if strided {
        unravel("_i", nd, idx, "    ", &mut s);
    }
    for (k, p) in ins.iter().chain(outs).enumerate() {
        let t = b.param_types[k].c_name();
        let is_out = k >= nin;
        if k < nin && b.scalar[k] {
            continue;
        }
        if p.raw {
            let c = if is_out { "" } else { "const " };
            let _ = writeln!(s, "    {c}{t}* const {} = _p_{};", p.name, p.name);
            continue;
        }
        let shape = b
            .shapes
            .get(k)
            .cloned()
            .flatten()
            .unwrap_or_else(|| b.shape.clone());
        let off = offset_expr(addr_of(&b.shape, &shape), &p.name, nd, "_i");
        let c = if is_out { "" } else { "const " };
        let _ = writeln!(s, "    {c}{t}& {} = _p_{}[{off}];", p.name, p.name);
    }
    let _ = writeln!(s, "    {operation};");
    s.push_str("  }\n}\n");
    Ok(s)
}
