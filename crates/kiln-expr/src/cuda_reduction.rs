//! CUDA source of reduction kernels (see [`crate::cuda`] for the conventions).

use std::fmt::Write;

use crate::cuda::{
    addr_of, assigns, lit, load_expr, offset_expr, param_decls, store_expr, unravel, var_name, var_use, Addr,
    Emit, KernelParam, HALF_HELPERS, REDUCTION_BLOCK,
};
use crate::params::Param;
use crate::typed::{Var, VarKind, TS, TX};
use crate::types::Value;

/// The parameters of a reduction kernel, in order.
pub(crate) fn reduction_params(
    ins: &[Param],
    outs: &[Param],
    rb: &crate::reduction::ReductionBinding,
) -> Vec<KernelParam> {
    let b = &rb.binding;
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
            continue;
        }
        v.push(KernelParam::Array {
            name: p.name.clone(),
            dtype: t,
            output: k >= nin,
        });
        if k < nin {
            let shape = b.shapes.get(k).cloned().flatten().unwrap_or_default();
            if addr_of(&b.shape, &shape) != Addr::Uniform {
                strided.push(p.name.clone());
            }
        }
    }
    v.push(KernelParam::Size);
    v.push(KernelParam::ReduceSize);
    let nd = b.shape.len();
    if !strided.is_empty() {
        for axis in 0..nd {
            v.push(KernelParam::Extent { axis });
        }
        for name in strided {
            for axis in 0..nd {
                v.push(KernelParam::Stride {
                    name: name.clone(),
                    axis,
                });
            }
        }
    }
    v
}

/// The reduction kernel's source: one block per output element (grid-stride over outputs);
/// each thread folds a strided share of the reduced elements from the identity, then a
/// shared-memory tree combines the block's partials (`blockDim.x` = [`REDUCTION_BLOCK`]).
#[allow(clippy::too_many_arguments)]
pub(crate) fn reduction_source(
    name: &str,
    ins: &[Param],
    outs: &[Param],
    rb: &crate::reduction::ReductionBinding,
    map_vars: &[Var],
    map: &TX,
    red_vars: &[Var],
    red: &TX,
    post_vars: &[Var],
    post: &[TS],
    identity: Value,
) -> String {
    let b = &rb.binding;
    let params = reduction_params(ins, outs, rb);
    let names: Vec<String> = ins.iter().chain(outs).map(|p| p.name.clone()).collect();
    let nd = b.shape.len();
    let strided = params.iter().any(|p| matches!(p, KernelParam::Stride { .. }));
    let rt = rb.reduce_type;
    let rc = rt.c_name();
    let mut s = String::new();
    let _ = writeln!(
        s,
        "// kiln-expr reduction kernel `{name}`: one block of {REDUCTION_BLOCK} threads per output element."
    );
    s.push_str(HALF_HELPERS);
    let _ = writeln!(
        s,
        "extern \"C\" __global__ void __launch_bounds__({REDUCTION_BLOCK}) {name}(\n    {}) {{",
        param_decls(&params, &[])
    );
    let _ = writeln!(s, "  __shared__ {rc} _sdata[{REDUCTION_BLOCK}];");
    let _ = writeln!(s, "  const long long _out_size = _n;\n  const long long _in_size = _n * _red_n;\n  (void)_out_size; (void)_in_size;");
    let _ = writeln!(
        s,
        "  for (long long _o = blockIdx.x; _o < _n; _o += gridDim.x) {{"
    );
    let _ = writeln!(s, "    {rc} _s = {};", lit(identity, rt));
    let _ = writeln!(
        s,
        "    for (long long _r = threadIdx.x; _r < _red_n; _r += blockDim.x) {{"
    );
    let _ = writeln!(s, "      const long long _f = _o * _red_n + _r;");
    if strided {
        unravel("_f", nd, "long long", "      ", &mut s);
    }
    let me = Emit {
        vars: map_vars,
        names: &names,
        raw_types: &b.param_types,
    };
    for v in map_vars {
        if let VarKind::In(k) = v.kind {
            let shape = b.shapes.get(k).cloned().flatten().unwrap_or_default();
            let off = offset_expr(
                if addr_of(&b.shape, &shape) == Addr::Uniform {
                    Addr::Uniform
                } else {
                    Addr::Strided
                },
                &v.name,
                nd,
                "_f",
            );
            let _ = writeln!(
                s,
                "      const {} {} = {};",
                v.ty.c_name(),
                v.name,
                load_expr(v.ty, &format!("_p_{}[{off}]", v.name))
            );
        }
    }
    let re = Emit {
        vars: red_vars,
        names: &names,
        raw_types: &b.param_types,
    };
    let red_s = re.expr(red);
    let _ = writeln!(s, "      const {rc} _m = {};", me.expr(map));
    let _ = writeln!(
        s,
        "      {{ const {rc} a = _s; const {rc} b = _m; (void)a; (void)b; _s = {red_s}; }}"
    );
    let _ = writeln!(s, "    }}");
    let _ = writeln!(s, "    _sdata[threadIdx.x] = _s;\n    __syncthreads();");
    let _ = writeln!(
        s,
        "    for (unsigned int _k = blockDim.x / 2; _k > 0; _k >>= 1) {{"
    );
    let _ = writeln!(s, "      if (threadIdx.x < _k) {{ const {rc} a = _sdata[threadIdx.x]; const {rc} b = _sdata[threadIdx.x + _k]; (void)a; (void)b; _sdata[threadIdx.x] = {red_s}; }}");
    let _ = writeln!(s, "      __syncthreads();\n    }}");
    let _ = writeln!(s, "    if (threadIdx.x == 0) {{");
    let _ = writeln!(s, "      const {rc} a = _sdata[0]; (void)a;");
    let pe = Emit {
        vars: post_vars,
        names: &names,
        raw_types: &b.param_types,
    };
    let mut stores = Vec::new();
    for (id, v) in post_vars.iter().enumerate() {
        match v.kind {
            VarKind::Out(_) => {
                let (mut reads, mut cw) = (false, false);
                var_use(post, id, false, &mut reads, &mut cw);
                if reads || cw {
                    let _ = writeln!(
                        s,
                        "      {} {} = {};",
                        v.ty.c_name(),
                        v.name,
                        load_expr(v.ty, &format!("_p_{}[_o]", v.name))
                    );
                } else {
                    let _ = writeln!(s, "      {} {};", v.ty.c_name(), v.name);
                }
                if assigns(post, id) {
                    stores.push(format!(
                        "      _p_{}[_o] = {};",
                        v.name,
                        store_expr(v.ty, &v.name)
                    ));
                }
            }
            VarKind::Local => {
                let _ = writeln!(s, "      {} {} = 0;", v.ty.c_name(), var_name(post_vars, id));
            }
            _ => {}
        }
    }
    pe.stmts(post, 3, &mut s);
    for st in stores {
        let _ = writeln!(s, "{st}");
    }
    let _ = writeln!(s, "    }}\n    __syncthreads();\n  }}\n}}");
    s
}
