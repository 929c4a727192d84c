//! The vectorised form of an element-wise kernel: where every array of the loop is the
//! whole loop in C order (or one element broadcast to it) and no parameter is raw, the
//! generated source holds a second kernel, `<name>_vec`, that moves each array in 16-byte
//! vectors (8 or 4 bytes for the narrower types of a mixed-width kernel) with streaming
//! cache hints, two vectors' loads in flight a thread before the first store, and runs the
//! same per-element code on every lane. It is kiln's built-in map kernels' shape
//! (`kernels/map.cu`, 97% of the device-copy rate on an H200), which a one-element-a-thread
//! loop does not reach: its 4-byte accesses keep too few bytes in flight per SM.
//!
//! The arithmetic per element is the scalar kernel's, emitted by the same code, so both
//! kernels (and the CPU evaluator) give the same bits. The launcher takes the vector kernel
//! only when every vector-accessed array starts on its vector's alignment ([`VectorPlan::fits`]);
//! the `n % width` tail runs one element a thread in the same launch.

use std::fmt::Write;

use crate::cuda::{
    addr_of, assigns, load_expr, param_decls, store_expr, var_name, var_use, Addr, Emit, KernelParam,
};
use crate::elementwise::Typed;
use crate::params::{Binding, Param};
use crate::typed::VarKind;
use crate::types::ScalarType;

/// Threads per block of a vector kernel.
pub const VECTOR_BLOCK: u32 = 256;
/// Vectors each thread moves (all loads before the first store).
const STEPS: usize = 2;

/// How to launch an element-wise kernel's vector form.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VectorPlan {
    /// The vector kernel's symbol (`<name>_vec`), in the same module as the scalar one.
    pub symbol: String,
    /// Elements per vector (every array moves this many elements a step).
    pub width: usize,
    /// Each vector-accessed array parameter and the byte alignment its address needs.
    pub aligned: Vec<(String, usize)>,
}

impl VectorPlan {
    /// Threads per block.
    pub fn block(&self) -> u32 {
        VECTOR_BLOCK
    }

    /// Blocks for a loop of `n` elements: every vector and every tail element has a thread.
    pub fn grid(&self, n: usize) -> u32 {
        let vecs = n / self.width;
        let per_block = VECTOR_BLOCK as usize * STEPS;
        let tail = n % self.width;
        vecs.div_ceil(per_block)
            .max(tail.div_ceil(VECTOR_BLOCK as usize))
            .clamp(1, i32::MAX as usize) as u32
    }

    /// Whether the arrays' addresses allow the vector kernel: `addr(name)` gives the device
    /// address of the named array parameter.
    pub fn fits(&self, addr: impl Fn(&str) -> Option<u64>) -> bool {
        self.aligned
            .iter()
            .all(|(name, a)| addr(name).is_some_and(|p| p % *a as u64 == 0))
    }
}

/// The C type `bytes` of one vector travel as (`__ldcs`/`__stcs` overloads exist for these).
fn vector_c(bytes: usize) -> &'static str {
    match bytes {
        16 => "uint4",
        8 => "uint2",
        _ => "unsigned int",
    }
}

/// The array parameters of the loop (index, parameter, element type, addressing), or `None`
/// when the kernel has no vector form (a raw or strided array, or no array at all).
fn loop_arrays<'a>(
    ins: &'a [Param],
    outs: &'a [Param],
    b: &Binding,
) -> Option<Vec<(usize, &'a Param, ScalarType, Addr)>> {
    let nin = ins.len();
    let mut v = Vec::new();
    for (k, p) in ins.iter().chain(outs).enumerate() {
        if k < nin && b.scalar[k] {
            continue;
        }
        if p.raw {
            return None;
        }
        let shape = b
            .shapes
            .get(k)
            .cloned()
            .flatten()
            .unwrap_or_else(|| b.shape.clone());
        let a = addr_of(&b.shape, &shape);
        if a == Addr::Strided {
            return None;
        }
        v.push((k, p, b.param_types[k], a));
    }
    Some(v)
}

/// The plan of the vector form, when the kernel has one: every loop array contiguous or
/// uniform, at least one contiguous, and every contiguous array's vector at least 4 bytes
/// (the widest element type sets the width: 16 bytes of it).
pub(crate) fn plan(name: &str, ins: &[Param], outs: &[Param], b: &Binding) -> Option<VectorPlan> {
    let arrays = loop_arrays(ins, outs, b)?;
    let contiguous: Vec<_> = arrays.iter().filter(|a| a.3 == Addr::Contiguous).collect();
    let widest = contiguous.iter().map(|a| a.2.size()).max()?;
    let width = 16 / widest;
    let narrowest = contiguous.iter().map(|a| a.2.size()).min()?;
    if width * narrowest < 4 || b.size() < width {
        return None;
    }
    Some(VectorPlan {
        symbol: format!("{name}_vec"),
        width,
        aligned: contiguous
            .iter()
            .map(|a| (a.1.name.clone(), width * a.2.size()))
            .collect(),
    })
}

/// The vector kernel's source (appended to the scalar kernel's, whose helpers it uses).
pub(crate) fn source(
    plan: &VectorPlan,
    params: &[KernelParam],
    ins: &[Param],
    outs: &[Param],
    b: &Binding,
    t: &Typed,
) -> String {
    let names: Vec<String> = ins.iter().chain(outs).map(|p| p.name.clone()).collect();
    let arrays = loop_arrays(ins, outs, b).unwrap_or_default();
    let w = plan.width;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "// its vector form: {w} elements a vector, {STEPS} vectors a thread, loads before stores."
    );
    let _ = writeln!(
        s,
        "extern \"C\" __global__ void __launch_bounds__({VECTOR_BLOCK}) {}(\n    {}) {{",
        plan.symbol,
        param_decls(params, &[])
    );
    s.push_str(&crate::cuda_complex::param_aliases(params, "  "));
    let _ = writeln!(s, "  const long long _ind_size = _n;");
    let _ = writeln!(s, "  const long long _nv = _n / {w};");
    let _ = writeln!(
        s,
        "  const long long _j0 = (long long)blockIdx.x * ({VECTOR_BLOCK} * {STEPS}) + threadIdx.x;"
    );
    // one union a contiguous array: the vector and its lanes
    let contiguous: Vec<_> = arrays.iter().filter(|a| a.3 == Addr::Contiguous).collect();
    for a in &contiguous {
        let bytes = w * a.2.size();
        let _ = writeln!(
            s,
            "  union _kv_{n} {{ {} u; {} v[{w}]; }};",
            vector_c(bytes),
            a.2.c_storage_name(),
            n = a.1.name
        );
    }
    // which contiguous arrays are read (inputs; outputs the body reads or writes only
    // under a condition) and which are stored (outputs the body assigns)
    let id_of = |name: &str| {
        t.vars
            .iter()
            .position(|v| v.name == name && !matches!(v.kind, VarKind::Local))
    };
    let mut loads = Vec::new();
    let mut stores = Vec::new();
    for a in &contiguous {
        let nin = ins.len();
        let Some(id) = id_of(&a.1.name) else { continue };
        if a.0 < nin {
            loads.push(*a);
        } else {
            let (mut reads, mut cw) = (false, false);
            var_use(&t.body, id, false, &mut reads, &mut cw);
            if reads || cw {
                loads.push(*a);
            }
            if assigns(&t.body, id) {
                stores.push(*a);
            }
        }
    }
    for a in &contiguous {
        let _ = writeln!(s, "  _kv_{n} _v_{n}[{STEPS}];", n = a.1.name);
    }
    let _ = writeln!(s, "#pragma unroll");
    let _ = writeln!(s, "  for (int _s = 0; _s < {STEPS}; ++_s) {{");
    let _ = writeln!(s, "    const long long _j = _j0 + _s * {VECTOR_BLOCK};");
    let _ = writeln!(s, "    if (_j < _nv) {{");
    for a in &loads {
        let bytes = w * a.2.size();
        let _ = writeln!(
            s,
            "      _v_{n}[_s].u = __ldcs((const {vc}*)_p_{n} + _j);",
            n = a.1.name,
            vc = vector_c(bytes)
        );
    }
    let _ = writeln!(s, "    }}\n  }}");
    let _ = writeln!(s, "#pragma unroll");
    let _ = writeln!(s, "  for (int _s = 0; _s < {STEPS}; ++_s) {{");
    let _ = writeln!(s, "    const long long _j = _j0 + _s * {VECTOR_BLOCK};");
    let _ = writeln!(s, "    if (_j < _nv) {{");
    let _ = writeln!(s, "#pragma unroll");
    let _ = writeln!(s, "      for (int _w = 0; _w < {w}; ++_w) {{");
    let _ = writeln!(s, "        const long long i = _j * {w} + _w;");
    let _ = writeln!(s, "        (void)i; (void)_ind_size;");
    element_body(&mut s, t, &names, b, &arrays, "        ", |a| {
        format!("_v_{}[_s].v[_w]", a)
    });
    let _ = writeln!(s, "      }}");
    for a in &stores {
        let bytes = w * a.2.size();
        let _ = writeln!(
            s,
            "      __stcs(({vc}*)_p_{n} + _j, _v_{n}[_s].u);",
            n = a.1.name,
            vc = vector_c(bytes)
        );
    }
    let _ = writeln!(s, "    }}\n  }}");
    // the tail: elements _nv * w .. _n, one a thread
    let _ = writeln!(
        s,
        "  const long long _tail = (long long)blockIdx.x * {VECTOR_BLOCK} + threadIdx.x;"
    );
    let _ = writeln!(s, "  if (_tail < _n - _nv * {w}) {{");
    let _ = writeln!(s, "    const long long i = _nv * {w} + _tail;");
    let _ = writeln!(s, "    (void)i; (void)_ind_size;");
    let mut tail = String::new();
    element_body(&mut tail, t, &names, b, &arrays, "    ", |a| format!("_p_{a}[i]"));
    s.push_str(&tail);
    s.push_str("  }\n}\n");
    s
}

/// One element's code: each loop array's element bound to its name (`slot(name)` is where a
/// contiguous array's element lives; uniform arrays read element 0), the body, then the
/// assigned outputs written back to their slots.
fn element_body(
    s: &mut String,
    t: &Typed,
    names: &[String],
    b: &Binding,
    arrays: &[(usize, &Param, ScalarType, Addr)],
    pad: &str,
    slot: impl Fn(&str) -> String,
) {
    let e = Emit {
        vars: &t.vars,
        names,
        raw_types: &b.param_types,
    };
    let addr = |name: &str| arrays.iter().find(|a| a.1.name == name).map(|a| a.3);
    let mut stores = Vec::new();
    for (id, v) in t.vars.iter().enumerate() {
        let at = |name: &str| match addr(name) {
            Some(Addr::Uniform) => format!("_p_{name}[0]"),
            _ => slot(name),
        };
        match v.kind {
            VarKind::In(_) => {
                let _ = writeln!(
                    s,
                    "{pad}const {} {} = {};",
                    v.ty.c_name(),
                    v.name,
                    load_expr(v.ty, &at(&v.name))
                );
            }
            VarKind::Out(_) => {
                let (mut reads, mut cw) = (false, false);
                var_use(&t.body, id, false, &mut reads, &mut cw);
                if reads || cw {
                    let _ = writeln!(
                        s,
                        "{pad}{} {} = {};",
                        v.ty.c_name(),
                        v.name,
                        load_expr(v.ty, &at(&v.name))
                    );
                } else {
                    let _ = writeln!(s, "{pad}{} {};", v.ty.c_name(), v.name);
                }
                if assigns(&t.body, id) {
                    stores.push(format!("{pad}{} = {};", at(&v.name), store_expr(v.ty, &v.name)));
                }
            }
            VarKind::Local => {
                let _ = writeln!(
                    s,
                    "{pad}{} {} = {};",
                    v.ty.c_name(),
                    var_name(&t.vars, id),
                    crate::cuda::zero_init(v.ty)
                );
            }
            VarKind::Scalar(_) | VarKind::Acc(_) => {}
        }
    }
    let depth = pad.len() / 2;
    e.stmts(&t.body, depth, s);
    for st in stores {
        let _ = writeln!(s, "{st}");
    }
}
