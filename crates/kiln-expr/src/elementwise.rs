//! `ElementwiseKernel`: CuPy's user element-wise kernel.

use std::collections::HashMap;

use kiln_core::Error;
use rayon::prelude::*;

use crate::cpu::exec::{self, Chunk, PData, Sizes};
use crate::cpu::io::InView;
use crate::cpu::program::{compile_body, Program, Regs};
use crate::cpu::CHUNK;
use crate::cuda::{self, KernelParam};
use crate::params::{
    broadcast_shapes, decide_types, is_valid_kernel_name, parse_params, ArgSpec, Binding, Param,
};
use crate::parse::{Parser, Stmt};
use crate::typed::{Checker, Var, VarKind, TS};
use crate::types::{HostArray, HostArrayMut, OwnedArray, Scalar, ScalarType};

/// An argument of a CPU call.
#[derive(Clone, Debug)]
pub enum Arg<'a> {
    /// A host array.
    Array(HostArray<'a>),
    /// A scalar.
    Scalar(Scalar),
}

impl Arg<'_> {
    /// Its type and shape.
    pub fn spec(&self) -> ArgSpec {
        match self {
            Arg::Array(a) => ArgSpec::Array {
                dtype: a.dtype,
                shape: a.shape.clone(),
            },
            Arg::Scalar(s) => ArgSpec::Scalar(s.dtype()),
        }
    }
}

/// A body after type checking for one binding.
pub(crate) struct Typed {
    pub vars: Vec<Var>,
    pub body: Vec<TS>,
}

/// A user element-wise kernel (CuPy's `ElementwiseKernel`): for every element of the
/// broadcast shape, `operation` runs with each non-raw parameter naming its element.
#[derive(Clone, Debug)]
pub struct ElementwiseKernel {
    name: String,
    ins: Vec<Param>,
    outs: Vec<Param>,
    /// The body as written (emitted verbatim for the GPU when kiln's compiler rejects it).
    operation: String,
    preamble: String,
    /// The parsed body, or why it does not parse (kept: a GPU-only body may still be
    /// emitted verbatim).
    body: Result<Vec<Stmt>, String>,
}

pub(crate) fn placeholders(ps: &[Param]) -> Vec<String> {
    let mut v: Vec<String> = ps
        .iter()
        .filter_map(|p| match &p.ty {
            crate::params::ParamType::Placeholder(n) => Some(n.clone()),
            _ => None,
        })
        .collect();
    v.sort();
    v.dedup();
    v
}

impl ElementwiseKernel {
    /// Declares a kernel: `in_params` and `out_params` are `[raw] TYPE NAME` lists,
    /// `operation` the C body, `name` the CUDA function's name.
    pub fn new(in_params: &str, out_params: &str, operation: &str, name: &str) -> Result<Self, Error> {
        if !is_valid_kernel_name(name) {
            return Err(Error::invalid(
                "ElementwiseKernel",
                format!("Invalid kernel name: \"{name}\""),
            ));
        }
        let ins = parse_params(in_params, name)?;
        let outs = parse_params(out_params, name)?;
        if let Some(p) = outs.iter().find(|p| ins.iter().any(|q| q.name == p.name)) {
            return Err(Error::invalid(
                name,
                format!("the parameter name `{}` is used twice", p.name),
            ));
        }
        let mut all = ins.clone();
        all.extend(outs.iter().cloned());
        let ph = placeholders(&all);
        let body = Parser::new(operation, &ph, "operation", name)
            .and_then(|mut p| p.statements())
            .map_err(crate::parse::reason);
        Ok(ElementwiseKernel {
            name: name.into(),
            ins,
            outs,
            operation: operation.into(),
            preamble: String::new(),
            body,
        })
    }

    /// Adds CUDA source placed before the kernel (GPU only: a kernel with a preamble is
    /// emitted verbatim and cannot run on the CPU).
    pub fn with_preamble(mut self, preamble: &str) -> Self {
        self.preamble = preamble.into();
        self
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

    /// CuPy's argument count rule: inputs only, or inputs and every output.
    pub fn check_arg_count(&self, n: usize) -> Result<(), Error> {
        let (nin, nargs) = (self.ins.len(), self.ins.len() + self.outs.len());
        if n != nin && n != nargs {
            return Err(Error::invalid(&self.name, format!("Wrong number of arguments for '{}'. It must be either {nin} or {nargs} (with outputs), but given {n}.", self.name)));
        }
        Ok(())
    }

    /// Binds argument types and shapes: decides every placeholder, broadcasts the non-raw
    /// arrays (inputs and given outputs), checks given outputs. `size` is CuPy's `size=`:
    /// required when every array is raw, refused otherwise.
    pub fn bind(
        &self,
        inputs: &[ArgSpec],
        outputs: &[ArgSpec],
        size: Option<usize>,
    ) -> Result<Binding, Error> {
        let op = &self.name;
        self.check_arg_count(inputs.len() + outputs.len())?;
        if inputs.len() != self.ins.len() {
            return Err(Error::invalid(
                op,
                format!(
                    "{} inputs given for {} input parameters",
                    inputs.len(),
                    self.ins.len()
                ),
            ));
        }
        let (types, param_types) = decide_types(&self.ins, &self.outs, inputs, outputs, op)?;
        let mut nonraw: Vec<&[usize]> = Vec::new();
        let mut shapes = Vec::new();
        for (p, a) in self.ins.iter().chain(&self.outs).zip(
            inputs
                .iter()
                .map(Some)
                .chain(outputs.iter().map(Some))
                .chain(std::iter::repeat(None)),
        ) {
            match a {
                Some(ArgSpec::Array { shape, .. }) if !p.raw => {
                    nonraw.push(shape);
                    shapes.push(Some(shape.clone()));
                }
                _ => shapes.push(None),
            }
        }
        let shape = match size {
            Some(n) => {
                if !nonraw.is_empty() {
                    return Err(Error::invalid(
                        op,
                        "Specified 'size' can be used only if all of the ndarray are 'raw'.",
                    ));
                }
                vec![n]
            }
            None => {
                if nonraw.is_empty() {
                    return Err(Error::invalid(
                        op,
                        "Loop size is undecided. Pass `size` when every array parameter is raw.",
                    ));
                }
                broadcast_shapes(&nonraw, op)?
            }
        };
        for (k, (p, a)) in self.outs.iter().zip(outputs).enumerate() {
            if let ArgSpec::Array { shape: s, dtype } = a {
                if !p.raw && *s != shape {
                    return Err(Error::invalid(op, format!("Out shape is mismatched: the output `{}` has shape {s:?}, the kernel's shape is {shape:?}", p.name)));
                }
                let want = param_types[self.ins.len() + k];
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
        if outputs.is_empty() {
            if let Some(p) = self.outs.iter().find(|p| p.raw) {
                if size.is_none() {
                    return Err(Error::invalid(
                        op,
                        format!(
                            "Output array size is Undecided: pass the raw output `{}` or `size`",
                            p.name
                        ),
                    ));
                }
            }
        }
        let scalar = inputs.iter().map(|a| matches!(a, ArgSpec::Scalar(_))).collect();
        Ok(Binding {
            types,
            param_types,
            scalar,
            shape,
            shapes,
        })
    }

    /// Type-checks the body for a binding.
    pub(crate) fn typed(&self, b: &Binding) -> Result<Typed, Error> {
        let body = self
            .body
            .as_ref()
            .map_err(|e| Error::invalid(&self.name, e.clone()))?;
        let nin = self.ins.len();
        let mut raws = HashMap::new();
        for (k, p) in self.ins.iter().chain(&self.outs).enumerate() {
            if p.raw {
                raws.insert(p.name.clone(), (k, b.param_types[k], k >= nin));
            }
        }
        let types = b.type_map();
        let mut ck = Checker::new(&raws, &types, false, &self.name);
        ck.what = "operation".into();
        for (k, p) in self.ins.iter().chain(&self.outs).enumerate() {
            if p.raw {
                continue;
            }
            let kind = if k >= nin {
                VarKind::Out(k)
            } else if b.scalar[k] {
                VarKind::Scalar(k)
            } else {
                VarKind::In(k)
            };
            ck.declare(&p.name, b.param_types[k], kind);
        }
        let body = ck.statements(body)?;
        Ok(Typed { vars: ck.vars, body })
    }

    /// Checks the body against a binding as the CPU path compiles it (kiln's C subset, C's
    /// conversions), without running it: an error names the construct and its line. A body
    /// that passes runs on the CPU and emits as typed CUDA; one that fails could still be
    /// emitted verbatim for the GPU ([`ElementwiseKernel::cuda_source`]).
    pub fn type_check(&self, b: &Binding) -> Result<(), Error> {
        self.typed(b).map(|_| ())
    }

    /// The fused CUDA C++ source for a binding (see [`crate::cuda`] for its parameters).
    ///
    /// A body kiln's compiler rejects (a loop, a call to a preamble function, any CUDA
    /// beyond the C subset) is emitted verbatim, as CuPy does: placeholders become
    /// `typedef`s, non-raw parameters references to their element, raw ones pointers; NVRTC
    /// then judges it. Such a kernel runs only on the GPU.
    pub fn cuda_source(&self, b: &Binding) -> Result<String, Error> {
        match self.typed(b) {
            Ok(t) => Ok(cuda::elementwise_source(
                &self.name,
                &self.ins,
                &self.outs,
                b,
                &t,
                &self.preamble,
            )),
            Err(e) => cuda::elementwise_verbatim(
                &self.name,
                &self.ins,
                &self.outs,
                b,
                &self.operation,
                &self.preamble,
            )
            .map_err(|v| {
                Error::invalid(
                    &self.name,
                    format!(
                        "{}; and it cannot be emitted verbatim: {v}",
                        crate::parse::reason(e)
                    ),
                )
            }),
        }
    }

    /// How to launch the vectorised form the source holds for this binding, if it has one
    /// (see [`VectorPlan`]): every array of the loop contiguous or broadcast from one
    /// element, none raw, a body within kiln's C subset. The launcher checks the arrays'
    /// alignment with [`VectorPlan::fits`] and otherwise launches the scalar kernel.
    pub fn vector_plan(&self, b: &Binding) -> Option<crate::VectorPlan> {
        self.typed(b).ok()?;
        crate::cuda_vector::plan(&self.name, &self.ins, &self.outs, b)
    }

    /// The generated kernel's parameters, in order, for a binding: every parameter (arrays
    /// as device pointers, scalars by value), `Size`, then, when some operand is broadcast,
    /// the loop's extents and each broadcast operand's strides (in elements, 0 along
    /// broadcast axes), then each raw array's element count. A non-raw array whose shape is
    /// the loop's is indexed as C-contiguous: the launcher passes a C-contiguous array
    /// there (a copy of a strided view); raw arrays are indexed by flat C-order index and
    /// must be C-contiguous too.
    pub fn kernel_params(&self, b: &Binding) -> Vec<KernelParam> {
        cuda::elementwise_params(&self.ins, &self.outs, b)
    }

    /// Runs the kernel on the CPU into caller-allocated outputs (C-contiguous).
    pub fn call(
        &self,
        inputs: &[Arg<'_>],
        outputs: &mut [HostArrayMut<'_>],
        size: Option<usize>,
    ) -> Result<(), Error> {
        let op = &self.name;
        if !self.preamble.is_empty() {
            return Err(Error::invalid(op, "a kernel with a preamble runs only on the GPU (kiln cannot evaluate preamble code on the CPU)"));
        }
        self.check_arg_count(inputs.len() + outputs.len())?;
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
        let in_specs: Vec<ArgSpec> = inputs.iter().map(Arg::spec).collect();
        let out_specs: Vec<ArgSpec> = outputs
            .iter()
            .map(|o| ArgSpec::Array {
                dtype: o.dtype,
                shape: o.shape.clone(),
            })
            .collect();
        let b = self.bind(&in_specs, &out_specs, size)?;
        self.call_bound(inputs, outputs, &b)
    }

    /// Runs a kernel bound by [`ElementwiseKernel::bind`] into `outputs` (C-contiguous, of
    /// the binding's shape and output types). The binding decides the size rule: outputs
    /// the caller allocated after binding without them do not count as given (CuPy's rule).
    pub fn call_bound(
        &self,
        inputs: &[Arg<'_>],
        outputs: &mut [HostArrayMut<'_>],
        b: &Binding,
    ) -> Result<(), Error> {
        let op = &self.name;
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
        let total = b.size();
        if total == 0 {
            return Ok(());
        }
        let t = self.typed(b)?;
        let mut scalars = vec![None; self.ins.len() + self.outs.len()];
        let mut params = Vec::new();
        for (k, (p, a)) in self.ins.iter().zip(inputs).enumerate() {
            match a {
                Arg::Scalar(s) => {
                    scalars[k] = Some(s.cast(b.param_types[k]).to_value());
                    params.push(PData::Scalar);
                }
                Arg::Array(arr) => {
                    arr.validate(op, &p.name)?;
                    params.push(PData::In(if p.raw {
                        raw_view(arr)
                    } else {
                        broadcast_view(arr, &b.shape)
                    }));
                }
            }
        }
        for (k, o) in outputs.iter().enumerate() {
            params.push(PData::Out {
                k,
                dtype: o.dtype,
                len: o.shape.iter().product(),
            });
        }
        let prog = compile_body(&t.body, &t.vars, &scalars);
        let names: Vec<String> = self
            .ins
            .iter()
            .chain(&self.outs)
            .map(|p| p.name.clone())
            .collect();
        let sizes = Sizes {
            size: total as i64,
            ..Sizes::default()
        };
        let any_raw_out = self.outs.iter().any(|p| p.raw);
        let mut slices: Vec<&mut [u8]> = outputs
            .iter_mut()
            .map(|o| {
                let n = o.shape.iter().product::<usize>() * o.dtype.size();
                &mut o.bytes[..n]
            })
            .collect();
        run_chunks(
            &prog,
            &params,
            &mut slices,
            &sizes,
            total,
            any_raw_out,
            op,
            &names,
        )
    }

    /// Runs the kernel on the CPU, allocating every output.
    pub fn call_alloc(&self, inputs: &[Arg<'_>], size: Option<usize>) -> Result<Vec<OwnedArray>, Error> {
        self.check_arg_count(inputs.len())?;
        let in_specs: Vec<ArgSpec> = inputs.iter().map(Arg::spec).collect();
        let b = self.bind(&in_specs, &[], size)?;
        let nin = self.ins.len();
        let mut outs: Vec<OwnedArray> = (0..self.outs.len())
            .map(|k| OwnedArray::zeros(b.param_types[nin + k], &b.shape))
            .collect();
        let mut views: Vec<HostArrayMut<'_>> = outs.iter_mut().map(OwnedArray::view_mut).collect();
        if !self.preamble.is_empty() {
            return Err(Error::invalid(&self.name, "a kernel with a preamble runs only on the GPU (kiln cannot evaluate preamble code on the CPU)"));
        }
        self.call_bound(inputs, &mut views, &b)?;
        Ok(outs)
    }
}

/// A raw array: addressed by its own flat C-order index.
pub(crate) fn raw_view<'a>(a: &HostArray<'a>) -> InView<'a> {
    InView::new(
        a.dtype,
        a.bytes,
        a.offset as isize,
        a.shape.clone(),
        a.strides.clone(),
    )
}

/// An array seen through `shape` (NumPy broadcasting: missing leading axes and extent-1
/// axes get stride 0).
pub(crate) fn broadcast_view<'a>(a: &HostArray<'a>, shape: &[usize]) -> InView<'a> {
    let nd = shape.len();
    let off = nd - a.shape.len();
    let strides = (0..nd)
        .map(|j| {
            if j < off || a.shape[j - off] == 1 {
                0
            } else {
                a.strides[j - off]
            }
        })
        .collect();
    InView::new(a.dtype, a.bytes, a.offset as isize, shape.to_vec(), strides)
}

/// Runs `prog` over `total` loop elements: in parallel chunks, each writing its own piece of
/// every output, or (when a raw output may be written anywhere) sequentially.
#[allow(clippy::too_many_arguments)]
pub(crate) fn run_chunks(
    prog: &Program,
    params: &[PData<'_>],
    outs: &mut [&mut [u8]],
    sizes: &Sizes,
    total: usize,
    sequential: bool,
    kernel: &str,
    names: &[String],
) -> Result<(), Error> {
    let nchunks = total.div_ceil(CHUNK);
    let init = || {
        let mut r = Regs::new(prog, CHUNK);
        exec::setup(prog, &mut r, sizes, params);
        r
    };
    if sequential || nchunks == 1 {
        let mut regs = init();
        for ci in 0..nchunks {
            let start = ci * CHUNK;
            let n = CHUNK.min(total - start);
            let mut c = Chunk {
                start,
                n,
                params,
                outs: &mut *outs,
                out_shift: 0,
                kernel,
                names,
            };
            exec::run(prog, &mut regs, &mut c)?;
        }
        return Ok(());
    }
    let out_types: Vec<ScalarType> = params
        .iter()
        .filter_map(|p| match p {
            PData::Out { dtype, .. } => Some(*dtype),
            _ => None,
        })
        .collect();
    // A few contiguous blocks of chunks per thread: each block sets up its registers once and
    // owns its piece of every output.
    let blocks = nchunks.min(rayon::current_num_threads().max(1) * 4);
    let per_block = nchunks.div_ceil(blocks) * CHUNK;
    let mut per: Vec<Vec<&mut [u8]>> = (0..total.div_ceil(per_block))
        .map(|_| Vec::with_capacity(outs.len()))
        .collect();
    for (o, t) in outs.iter_mut().zip(&out_types) {
        for (c, piece) in o.chunks_mut(per_block * t.size()).enumerate() {
            per[c].push(piece);
        }
    }
    per.into_par_iter().enumerate().try_for_each(|(bi, mut pieces)| {
        let mut regs = init();
        let b0 = bi * per_block;
        let b1 = (b0 + per_block).min(total);
        let mut start = b0;
        while start < b1 {
            let n = CHUNK.min(b1 - start);
            let mut c = Chunk {
                start,
                n,
                params,
                outs: &mut pieces,
                out_shift: b0,
                kernel,
                names,
            };
            exec::run(prog, &mut regs, &mut c)?;
            start += n;
        }
        Ok(())
    })
}
