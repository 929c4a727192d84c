//! `ReductionKernel`: CuPy's user reduction kernel.

use std::collections::HashMap;

use kiln_core::Error;

use crate::cpu::exec::{self, Chunk, PData, Sizes};
use crate::cpu::io::InView;
use crate::cpu::program::{compile_body, compile_expr, internal, Regs};
use crate::cuda::KernelParam;
use crate::elementwise::{broadcast_view, placeholders, Arg};
use crate::params::{
    broadcast_shapes, decide_types, is_valid_kernel_name, parse_params, ArgSpec, Binding, Param, ParamType,
};
use crate::parse::{Expr, Parser, Stmt, TypeName};
use crate::typed::{cast, Checker, Var, VarKind, TS, TX};
use crate::types::{HostArrayMut, OwnedArray, ScalarType, Value};

mod run;
use run::Ctx;

/// Which axes a reduction reduces.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Axis {
    /// Every axis (`axis=None`).
    All,
    /// One axis; negative counts from the end.
    One(isize),
    /// Several axes; negative count from the end.
    Many(Vec<isize>),
}

/// A reduction's binding: types, the broadcast input shape and the axes.
#[derive(Clone, Debug, PartialEq)]
pub struct ReductionBinding {
    /// Types and the broadcast input shape (`binding.shape`).
    pub binding: Binding,
    /// Reduced axes of the input shape, ascending.
    pub reduce_axes: Vec<usize>,
    /// Kept axes of the input shape, ascending.
    pub out_axes: Vec<usize>,
    /// The outputs' shape.
    pub out_shape: Vec<usize>,
    /// The accumulator's type.
    pub reduce_type: ScalarType,
}

impl ReductionBinding {
    /// The loop's axes, as axes of the input shape: kept axes, then reduced ones. A
    /// [`KernelParam::Extent`]/[`KernelParam::Stride`] `axis` indexes this list.
    pub fn loop_axes(&self) -> Vec<usize> {
        self.out_axes.iter().chain(&self.reduce_axes).copied().collect()
    }
    /// Number of output elements.
    pub fn out_size(&self) -> usize {
        self.out_shape.iter().product()
    }
    /// Number of input elements reduced into each output.
    pub fn reduce_size(&self) -> usize {
        self.reduce_axes.iter().map(|&a| self.binding.shape[a]).product()
    }
}

/// A user reduction kernel (CuPy's `ReductionKernel`).
#[derive(Clone, Debug)]
pub struct ReductionKernel {
    name: String,
    ins: Vec<Param>,
    outs: Vec<Param>,
    map: Result<Expr, String>,
    reduce: Result<Expr, String>,
    post: Result<Vec<Stmt>, String>,
    identity: Option<Result<Expr, String>>,
    reduce_type: TypeName,
}

/// Typed parts for one binding.
struct TypedRed {
    map_vars: Vec<Var>,
    map: TX,
    red_vars: Vec<Var>,
    red: TX,
    post_vars: Vec<Var>,
    post: Vec<TS>,
    identity: Option<TX>,
}

impl ReductionKernel {
    /// Declares a reduction: for each output element, `a = identity`, then `a =
    /// reduce_expr(a, map_expr)` over the reduced input elements, then `post_map_expr` with
    /// `a` assigns the outputs. `reduce_type` is the accumulator's type; by default the first
    /// output parameter's (CuPy's rule). `identity` `None` starts from zero (CuPy's
    /// `_type_reduce()`) and refuses empty reductions.
    // CuPy's constructor, argument for argument.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        in_params: &str,
        out_params: &str,
        map_expr: &str,
        reduce_expr: &str,
        post_map_expr: &str,
        identity: Option<&str>,
        name: &str,
        reduce_type: Option<&str>,
    ) -> Result<Self, Error> {
        if !is_valid_kernel_name(name) {
            return Err(Error::invalid(
                "ReductionKernel",
                format!("Invalid kernel name: \"{name}\""),
            ));
        }
        let ins = parse_params(in_params, name)?;
        let outs = parse_params(out_params, name)?;
        if outs.is_empty() {
            return Err(Error::invalid(
                name,
                "a reduction needs at least one output parameter",
            ));
        }
        if let Some(p) = ins.iter().chain(&outs).find(|p| p.raw) {
            return Err(Error::invalid(name, format!("the raw parameter `{}`: raw parameters are not supported in reduction kernels; index the array in an element-wise kernel instead", p.name)));
        }
        let mut all = ins.clone();
        all.extend(outs.iter().cloned());
        let mut ph = placeholders(&all);
        ph.push("_type_reduce".into());
        let reduce_type = match reduce_type {
            None => match &outs[0].ty {
                ParamType::Concrete(t) => TypeName::Concrete(*t),
                ParamType::Placeholder(p) => TypeName::Placeholder(p.clone()),
            },
            Some(s) => match ScalarType::from_name(s)? {
                Some(t) => TypeName::Concrete(t),
                None if ph.iter().any(|p| p == s.trim()) => TypeName::Placeholder(s.trim().into()),
                None => {
                    return Err(Error::invalid(
                        name,
                        format!("reduce_type `{s}` is neither a type nor a placeholder of the parameters"),
                    ))
                }
            },
        };
        let ex = |src: &str, what: &str| {
            Parser::new(src, &ph, what, name)
                .and_then(|mut p| p.whole_expr())
                .map_err(crate::parse::reason)
        };
        let map = ex(map_expr, "map_expr");
        let reduce = ex(reduce_expr, "reduce_expr");
        let post = Parser::new(post_map_expr, &ph, "post_map_expr", name)
            .and_then(|mut p| p.statements())
            .map_err(crate::parse::reason);
        let identity = identity.map(|s| ex(s, "identity"));
        Ok(ReductionKernel {
            name: name.into(),
            ins,
            outs,
            map,
            reduce,
            post,
            identity,
            reduce_type,
        })
    }

    /// The kernel's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Input parameters.
    pub fn in_params(&self) -> &[Param] {
        &self.ins
    }

    /// Output parameters.
    pub fn out_params(&self) -> &[Param] {
        &self.outs
    }

    /// Binds types and shapes and normalises `axis`.
    pub fn bind(
        &self,
        inputs: &[ArgSpec],
        outputs: &[ArgSpec],
        axis: &Axis,
        keepdims: bool,
    ) -> Result<ReductionBinding, Error> {
        let op = &self.name;
        let (nin, nargs) = (self.ins.len(), self.ins.len() + self.outs.len());
        let n = inputs.len() + outputs.len();
        if inputs.len() != nin || (n != nin && n != nargs) {
            return Err(Error::invalid(op, format!("Wrong number of arguments for {op}: it takes {nin} inputs and optionally {} outputs, {n} given", self.outs.len())));
        }
        let (types, param_types) = decide_types(&self.ins, &self.outs, inputs, outputs, op)?;
        let arrays: Vec<&[usize]> = inputs
            .iter()
            .filter_map(|a| match a {
                ArgSpec::Array { shape, .. } => Some(shape.as_slice()),
                ArgSpec::Scalar(_) => None,
            })
            .collect();
        if arrays.is_empty() {
            return Err(Error::invalid(
                op,
                "Loop size is undecided: a reduction needs at least one input array",
            ));
        }
        let shape = broadcast_shapes(&arrays, op)?;
        let nd = shape.len();
        let given: Vec<isize> = match axis {
            Axis::All => (0..nd as isize).collect(),
            Axis::One(a) => vec![*a],
            Axis::Many(v) => v.clone(),
        };
        let mut reduce_axes = Vec::new();
        for &a in &given {
            let k = if a < 0 { a + nd as isize } else { a };
            if k < 0 || k >= nd as isize {
                return Err(Error::invalid(
                    op,
                    format!("AxisError: axis {a} is out of bounds for array of dimension {nd}"),
                ));
            }
            if reduce_axes.contains(&(k as usize)) {
                return Err(Error::invalid(op, "duplicate value in 'axis'"));
            }
            reduce_axes.push(k as usize);
        }
        reduce_axes.sort_unstable();
        let out_axes: Vec<usize> = (0..nd).filter(|k| !reduce_axes.contains(k)).collect();
        let out_shape: Vec<usize> = if keepdims {
            (0..nd)
                .map(|k| if reduce_axes.contains(&k) { 1 } else { shape[k] })
                .collect()
        } else {
            out_axes.iter().map(|&k| shape[k]).collect()
        };
        for (k, (p, a)) in self.outs.iter().zip(outputs).enumerate() {
            if let ArgSpec::Array { shape: s, dtype } = a {
                if *s != out_shape {
                    return Err(Error::invalid(op, format!("Out shape is mismatched: the output `{}` has shape {s:?}, the reduction gives {out_shape:?}", p.name)));
                }
                let want = param_types[nin + k];
                if *dtype != want {
                    return Err(Error::invalid(
                        op,
                        format!(
                            "the output `{}` has dtype {dtype}, the kernel writes {want}",
                            p.name
                        ),
                    ));
                }
            }
        }
        let mut tm = types.clone();
        let reduce_type = match &self.reduce_type {
            TypeName::Concrete(t) => *t,
            TypeName::Placeholder(p) => *tm.get(p).ok_or_else(|| {
                Error::invalid(op, format!("reduce_type `{p}` is not bound by any argument"))
            })?,
        };
        tm.insert("_type_reduce".into(), reduce_type);
        let scalar = inputs.iter().map(|a| matches!(a, ArgSpec::Scalar(_))).collect();
        let shapes = inputs
            .iter()
            .map(|a| match a {
                ArgSpec::Array { shape, .. } => Some(shape.clone()),
                ArgSpec::Scalar(_) => None,
            })
            .collect();
        let binding = Binding {
            types: tm,
            param_types,
            scalar,
            shape,
            shapes,
        };
        let rb = ReductionBinding {
            binding,
            reduce_axes,
            out_axes,
            out_shape,
            reduce_type,
        };
        if self.identity.is_none() && rb.out_size() > 0 && rb.reduce_size() == 0 {
            return Err(Error::invalid(
                op,
                format!("zero-size array to reduction operation {op} which has no identity"),
            ));
        }
        Ok(rb)
    }

    fn typed(&self, rb: &ReductionBinding) -> Result<TypedRed, Error> {
        let op = &self.name;
        let b = &rb.binding;
        let rt = rb.reduce_type;
        if let Some(t) = b.param_types.iter().chain([&rt]).find(|t| t.is_complex()) {
            return Err(Error::invalid(op, format!("ReductionKernel over {t}: complex values are supported in ElementwiseKernel only; reduce the parts (or abs(z)) an ElementwiseKernel computes")));
        }
        let types = b.type_map();
        let raws = HashMap::new();
        let nin = self.ins.len();
        let declare_ins = |ck: &mut Checker<'_>, arrays: bool| {
            for (k, p) in self.ins.iter().enumerate() {
                if b.scalar[k] {
                    ck.declare(&p.name, b.param_types[k], VarKind::Scalar(k));
                } else if arrays {
                    ck.declare(&p.name, b.param_types[k], VarKind::In(k));
                }
            }
        };
        let e = |r: &Result<Expr, String>| r.as_ref().map_err(|m| Error::invalid(op, m.clone())).cloned();
        let mut ck = Checker::new(&raws, &types, true, op);
        ck.what = "map_expr".into();
        declare_ins(&mut ck, true);
        let map = cast(ck.expr(&e(&self.map)?)?, rt);
        let map_vars = ck.vars;

        let mut ck = Checker::new(&raws, &types, true, op);
        ck.what = "reduce_expr".into();
        declare_ins(&mut ck, false);
        ck.declare("a", rt, VarKind::Acc(0));
        ck.declare("b", rt, VarKind::Acc(1));
        let red = cast(ck.expr(&e(&self.reduce)?)?, rt);
        let red_vars = ck.vars;

        let mut ck = Checker::new(&raws, &types, true, op);
        ck.what = "post_map_expr".into();
        declare_ins(&mut ck, false);
        ck.declare("a", rt, VarKind::Acc(0));
        for (k, p) in self.outs.iter().enumerate() {
            ck.declare(&p.name, b.param_types[nin + k], VarKind::Out(nin + k));
        }
        let post_src = self.post.as_ref().map_err(|m| Error::invalid(op, m.clone()))?;
        let post = ck.statements(post_src)?;
        let post_vars = ck.vars;

        let identity = match &self.identity {
            None => None,
            Some(r) => {
                let mut ck = Checker::new(&raws, &types, true, op);
                ck.what = "identity".into();
                Some(cast(ck.expr(&e(r)?)?, rt))
            }
        };
        Ok(TypedRed {
            map_vars,
            map,
            red_vars,
            red,
            post_vars,
            post,
            identity,
        })
    }

    /// The identity as a value of the reduce type (zero when there is none).
    fn identity_value(&self, t: &TypedRed, rt: ScalarType) -> Result<Value, Error> {
        let Some(x) = &t.identity else {
            return Ok(Value::I(0).cast(ScalarType::I64, rt));
        };
        let prog = compile_expr(x, &[], &[]);
        let mut regs = Regs::new(&prog, 1);
        let sizes = Sizes::default();
        exec::setup(&prog, &mut regs, &sizes, &[]);
        let names = Vec::new();
        let mut outs: Vec<&mut [u8]> = Vec::new();
        let mut c = Chunk {
            start: 0,
            n: 1,
            params: &[],
            outs: &mut outs,
            out_shift: 0,
            kernel: &self.name,
            names: &names,
        };
        exec::run(&prog, &mut regs, &mut c)?;
        let r = prog.result.ok_or_else(|| internal("identity has no result"))?;
        Ok(regs.bufs[r].get(0))
    }

    /// Checks `map_expr`, `reduce_expr`, `post_map_expr` and `identity` against a binding
    /// (types, the C subset, the identity's value) without running anything: what
    /// [`ReductionKernel::cuda_source`] and the CPU path would refuse, refused here.
    pub fn type_check(&self, rb: &ReductionBinding) -> Result<(), Error> {
        let t = self.typed(rb)?;
        self.identity_value(&t, rb.reduce_type).map(|_| ())
    }

    /// The fused CUDA source for a binding: one block of [`crate::REDUCTION_BLOCK`]
    /// threads per output element (grid-stride over outputs), a shared-memory tree in the
    /// block. See [`ReductionKernel::kernel_params`] for its parameters.
    pub fn cuda_source(&self, rb: &ReductionBinding) -> Result<String, Error> {
        let t = self.typed(rb)?;
        let ident = self.identity_value(&t, rb.reduce_type)?;
        Ok(crate::cuda_reduction::reduction_source(
            &self.name,
            &self.ins,
            &self.outs,
            rb,
            &t.map_vars,
            &t.map,
            &t.red_vars,
            &t.red,
            &t.post_vars,
            &t.post,
            ident,
        ))
    }

    /// The generated kernel's parameters, in order: the arrays and scalars, `Size` (output
    /// elements), `ReduceSize`, the extents of the loop axes ([`ReductionBinding::loop_axes`])
    /// and each non-uniform input's strides along them.
    pub fn kernel_params(&self, rb: &ReductionBinding) -> Vec<KernelParam> {
        crate::cuda_reduction::reduction_params(&self.ins, &self.outs, rb)
    }

    /// Runs the reduction on the CPU, allocating the outputs.
    pub fn call_alloc(
        &self,
        inputs: &[Arg<'_>],
        axis: &Axis,
        keepdims: bool,
    ) -> Result<Vec<OwnedArray>, Error> {
        let in_specs: Vec<ArgSpec> = inputs.iter().map(Arg::spec).collect();
        let rb = self.bind(&in_specs, &[], axis, keepdims)?;
        let nin = self.ins.len();
        let mut outs: Vec<OwnedArray> = (0..self.outs.len())
            .map(|k| OwnedArray::zeros(rb.binding.param_types[nin + k], &rb.out_shape))
            .collect();
        let mut views: Vec<HostArrayMut<'_>> = outs.iter_mut().map(OwnedArray::view_mut).collect();
        self.call(inputs, &mut views, axis, keepdims)?;
        Ok(outs)
    }

    /// Runs the reduction on the CPU into caller-allocated (C-contiguous) outputs.
    pub fn call(
        &self,
        inputs: &[Arg<'_>],
        outputs: &mut [HostArrayMut<'_>],
        axis: &Axis,
        keepdims: bool,
    ) -> Result<(), Error> {
        let op = &self.name;
        let in_specs: Vec<ArgSpec> = inputs.iter().map(Arg::spec).collect();
        let out_specs: Vec<ArgSpec> = outputs
            .iter()
            .map(|o| ArgSpec::Array {
                dtype: o.dtype,
                shape: o.shape.clone(),
            })
            .collect();
        if outputs.len() != self.outs.len() {
            return Err(Error::invalid(
                op,
                format!(
                    "{} outputs given for {} output parameters",
                    outputs.len(),
                    self.outs.len()
                ),
            ));
        }
        let rb = self.bind(&in_specs, &out_specs, axis, keepdims)?;
        for (p, o) in self.outs.iter().zip(outputs.iter()) {
            let need = o.shape.iter().product::<usize>() * o.dtype.size();
            if o.bytes.len() < need {
                return Err(Error::invalid(
                    op,
                    format!(
                        "the output `{}` holds {} bytes, its shape {:?} of {} needs {need}",
                        p.name,
                        o.bytes.len(),
                        o.shape,
                        o.dtype
                    ),
                ));
            }
        }
        let (nout, nred) = (rb.out_size(), rb.reduce_size());
        if nout == 0 {
            return Ok(());
        }
        let t = self.typed(&rb)?;
        let ident = self.identity_value(&t, rb.reduce_type)?;
        let b = &rb.binding;
        let nin = self.ins.len();
        let mut scalars = vec![None; nin + self.outs.len()];
        for (k, a) in inputs.iter().enumerate() {
            match a {
                Arg::Scalar(s) => scalars[k] = Some(s.cast(b.param_types[k]).to_value()),
                Arg::Array(arr) => arr.validate(op, &self.ins[k].name)?,
            }
        }
        // Lanes over outputs (few reduced elements each) or over the reduced elements.
        let outer = nred < 64 || nout >= nred;
        let axes: Vec<usize> = if outer {
            rb.reduce_axes.iter().chain(&rb.out_axes).copied().collect()
        } else {
            rb.loop_axes()
        };
        let mut params = Vec::new();
        for a in inputs {
            params.push(match a {
                Arg::Scalar(_) => PData::Scalar,
                Arg::Array(arr) => {
                    let v = broadcast_view(arr, &b.shape);
                    let shape = axes.iter().map(|&k| v.shape[k]).collect();
                    let strides = axes.iter().map(|&k| v.strides[k]).collect();
                    PData::In(InView::new(v.dtype, v.bytes, v.offset, shape, strides))
                }
            });
        }
        for (k, o) in outputs.iter().enumerate() {
            params.push(PData::Out {
                k,
                dtype: o.dtype,
                len: nout,
            });
        }
        let map = compile_expr(&t.map, &t.map_vars, &scalars);
        let red = compile_expr(&t.red, &t.red_vars, &scalars);
        let post = compile_body(&t.post, &t.post_vars, &scalars);
        let sizes = Sizes {
            size: nout as i64,
            in_size: (nout * nred) as i64,
            out_size: nout as i64,
        };
        let names: Vec<String> = self
            .ins
            .iter()
            .chain(&self.outs)
            .map(|p| p.name.clone())
            .collect();
        let mut slices: Vec<&mut [u8]> = outputs
            .iter_mut()
            .map(|o| {
                let n = nout * o.dtype.size();
                &mut o.bytes[..n]
            })
            .collect();
        let ctx = Ctx {
            map: &map,
            red: &red,
            post: &post,
            params: &params,
            sizes,
            names: &names,
            kernel: op,
            ident,
            nout,
            nred,
        };
        if outer {
            ctx.run_outer(&mut slices)
        } else {
            ctx.run_inner(&mut slices)
        }
    }
}
