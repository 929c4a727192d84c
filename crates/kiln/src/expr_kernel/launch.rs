//! An expression kernel bound to arrays in device memory: the generated source, the launch
//! shape and every argument of the generated parameter list, filled from the arrays'
//! addresses, shapes and strides. [`Runtime::elementwise_kernel`](crate::Runtime::elementwise_kernel)
//! and [`Runtime::reduction_kernel`](crate::Runtime::reduction_kernel) build one over the
//! arrays they upload; the Python package builds one over CuPy's or torch's arrays in place
//! and queues it on the caller's stream.

use crate::device::CudaBackend;
use kiln_core::{Error, Result};
use kiln_cuda::user::{KernelArg, Scalar as CudaScalar, ScalarType as CudaType, UserFunction};
use kiln_expr::{
    ArgSpec, Axis, Binding, ElementwiseKernel, KernelParam, Param, ReductionBinding, ReductionKernel, Scalar,
    ScalarType, VectorPlan,
};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Threads per block of an element-wise launch unless the caller picks (the generated loop
/// is grid-stride, so any block size covers every element; CuPy's default).
pub const ELEMENTWISE_BLOCK: u32 = 128;

/// An array in device memory as an expression kernel reads or writes it in place: kiln's
/// pool block, or another library's (CuPy, torch). The caller keeps the memory alive until
/// the launch's work is done.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceArray {
    /// Device address of element `[0, ...]`.
    pub ptr: u64,
    /// Element type.
    pub dtype: ScalarType,
    /// Extent of each axis.
    pub shape: Vec<usize>,
    /// Step between neighbours along each axis, in elements.
    pub strides: Vec<isize>,
}

impl DeviceArray {
    /// A C-contiguous array of `shape` at `ptr`.
    pub fn contiguous(ptr: u64, dtype: ScalarType, shape: &[usize]) -> Self {
        DeviceArray {
            ptr,
            dtype,
            shape: shape.to_vec(),
            strides: kiln_expr::c_strides(shape),
        }
    }

    fn len(&self) -> usize {
        self.shape.iter().product()
    }
}

/// One argument of an expression kernel on device arrays.
#[derive(Clone, Debug, PartialEq)]
pub enum DeviceArg {
    /// An array in device memory.
    Array(DeviceArray),
    /// A scalar (converted to the parameter's type, C's conversion, as CuPy does).
    Scalar(Scalar),
}

impl DeviceArg {
    /// What binding sees: the array's type and shape, or the scalar's type.
    pub fn spec(&self) -> ArgSpec {
        match self {
            DeviceArg::Array(a) => ArgSpec::Array {
                dtype: a.dtype,
                shape: a.shape.clone(),
            },
            DeviceArg::Scalar(s) => ArgSpec::Scalar(s.dtype()),
        }
    }
}

/// A call's arrays and scalars by parameter name, borrowed from the call (a lookup walks the
/// few parameters; nothing is copied or hashed per call).
#[derive(Default)]
pub(crate) struct Named<'a> {
    /// Each argument under its name, with whether it is an output.
    entries: Vec<(&'a str, &'a DeviceArg, bool)>,
}

impl<'a> Named<'a> {
    /// `args` under `names` (a kernel's parameter names, in order).
    pub(crate) fn add(&mut self, names: impl Iterator<Item = &'a str>, args: &'a [DeviceArg], outputs: bool) {
        self.entries.extend(names.zip(args).map(|(n, a)| (n, a, outputs)));
    }

    /// The array named `name` (the last one given under it: an output over an input).
    fn array(&self, name: &str) -> Option<&'a DeviceArray> {
        self.entries.iter().rev().find_map(|&(n, a, _)| match a {
            DeviceArg::Array(d) if n == name => Some(d),
            _ => None,
        })
    }

    /// The input scalar named `name` (scalars among outputs are dropped: binding refuses
    /// them).
    fn scalar(&self, name: &str) -> Option<&'a Scalar> {
        self.entries.iter().rev().find_map(|&(n, a, out)| match a {
            DeviceArg::Scalar(s) if n == name && !out => Some(s),
            _ => None,
        })
    }
}

/// The loop a generated kernel's shape parameters describe.
pub(crate) struct Geometry {
    /// Rank of the broadcast shape the strides are taken against.
    pub(crate) rank: usize,
    /// Extent of each loop axis.
    pub(crate) extents: Vec<usize>,
    /// Each loop axis as an axis of the broadcast shape.
    pub(crate) loop_axes: Vec<usize>,
    /// Loop elements (element-wise) or output elements (reduction).
    pub(crate) size: usize,
    /// Elements reduced into each output (reductions).
    pub(crate) reduce_size: usize,
}

impl Geometry {
    pub(crate) fn elementwise(b: &Binding) -> Self {
        Geometry {
            rank: b.shape.len(),
            extents: b.shape.clone(),
            loop_axes: (0..b.shape.len()).collect(),
            size: b.size(),
            reduce_size: 0,
        }
    }

    pub(crate) fn reduction(rb: &ReductionBinding) -> Self {
        let loop_axes = rb.loop_axes();
        Geometry {
            rank: rb.binding.shape.len(),
            extents: loop_axes.iter().map(|&a| rb.binding.shape[a]).collect(),
            loop_axes,
            size: rb.out_size(),
            reduce_size: rb.reduce_size(),
        }
    }
}

/// An expression kernel bound to arrays in device memory: its generated source, launch
/// shape and every argument of the generated parameter list (filled from the arrays'
/// addresses, shapes and strides), ready to compile and queue.
/// [`Runtime::elementwise_kernel`](crate::Runtime::elementwise_kernel) and
/// [`Runtime::reduction_kernel`](crate::Runtime::reduction_kernel) build one over the arrays
/// they upload; the Python package over CuPy's or torch's arrays in place, queued on the
/// caller's stream, through a [`LaunchCache`] so a repeated call neither binds nor compiles.
#[derive(Debug)]
pub struct ExprLaunch {
    prepared: Arc<Prepared>,
    name: String,
    grid: u32,
    block: u32,
    size: usize,
    args: Vec<KernelArg<'static>>,
}

/// What every call of one kernel with one argument signature shares: the generated source,
/// its parameter list and loop, the vector form's plan, and the compiled function per
/// backend, option list and symbol.
struct Prepared {
    name: String,
    source: String,
    params: Vec<KernelParam>,
    geometry: Geometry,
    /// The vector form, where the source has one and the caller set no block size.
    vector: Option<VectorPlan>,
    /// Threads a block of the one-element-a-thread (or reduction) kernel.
    block: u32,
    reduction: bool,
    functions: Mutex<Vec<Compiled>>,
}

/// One compiled function of a [`Prepared`]: the backend (by address: backends live as long
/// as their runtime, and a function checks on launch that it is given its own), the caller's
/// options, the symbol.
struct Compiled {
    backend: usize,
    options: Vec<String>,
    symbol: String,
    function: UserFunction,
}

impl std::fmt::Debug for Prepared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prepared")
            .field("name", &self.name)
            .field("params", &self.params)
            .field("vector", &self.vector)
            .finish()
    }
}

impl Prepared {
    fn elementwise(k: &ElementwiseKernel, b: &Binding, block: Option<u32>) -> Result<Self> {
        Ok(Prepared {
            name: k.name().to_string(),
            source: k.cuda_source(b)?,
            params: k.kernel_params(b),
            geometry: Geometry::elementwise(b),
            // (a CuPy `block_size=` keeps the one-element-a-thread kernel it describes)
            vector: block.is_none().then(|| k.vector_plan(b)).flatten(),
            block: block.unwrap_or(ELEMENTWISE_BLOCK).clamp(1, 1024),
            reduction: false,
            functions: Mutex::new(Vec::new()),
        })
    }

    fn reduction(k: &ReductionKernel, rb: &ReductionBinding) -> Result<Self> {
        Ok(Prepared {
            name: k.name().to_string(),
            source: k.cuda_source(rb)?,
            params: k.kernel_params(rb),
            geometry: Geometry::reduction(rb),
            vector: None,
            block: kiln_expr::REDUCTION_BLOCK,
            reduction: true,
            functions: Mutex::new(Vec::new()),
        })
    }

    /// The launch over one call's arrays and scalars.
    fn bind(self: &Arc<Self>, named: &Named<'_>) -> Result<ExprLaunch> {
        let args = args(named, &self.params, &self.geometry, &self.name)?;
        let size = self.geometry.size;
        // The vector form (16-byte accesses, two a thread) where every vector-accessed
        // array starts on its vector's alignment; the same parameters and per-element code
        // either way.
        let vector = self
            .vector
            .as_ref()
            .filter(|p| p.fits(|name| named.array(name).map(|a| a.ptr)));
        let (name, grid, block) = match vector {
            Some(p) => (p.symbol.clone(), p.grid(size), p.block()),
            // a reduction: one block per output element, grid-stride over the outputs
            None if self.reduction => (self.name.clone(), size.min(i32::MAX as usize) as u32, self.block),
            None => (
                self.name.clone(),
                size.div_ceil(self.block as usize).min(i32::MAX as usize) as u32,
                self.block,
            ),
        };
        Ok(ExprLaunch {
            prepared: self.clone(),
            name,
            grid,
            block,
            size,
            args,
        })
    }

    /// `symbol` as compiled for `dev` with `options` already, if it is.
    fn compiled(&self, dev: &CudaBackend, options: &[String], symbol: &str) -> Option<UserFunction> {
        let backend = dev as *const CudaBackend as usize;
        lock(&self.functions)
            .iter()
            .find(|c| c.backend == backend && c.symbol == symbol && c.options == options)
            .map(|c| c.function.clone())
    }

    /// `symbol` compiled for `dev` with the caller's `options` (once; later calls find it).
    fn function(&self, dev: &CudaBackend, options: &[String], symbol: &str) -> Result<UserFunction> {
        let backend = dev as *const CudaBackend as usize;
        let mut fs = lock(&self.functions);
        if let Some(c) = fs
            .iter()
            .find(|c| c.backend == backend && c.symbol == symbol && c.options == options)
        {
            return Ok(c.function.clone());
        }
        let function = dev
            .user_module(&self.source, &nvrtc_options(options))?
            .function(symbol)?;
        fs.push(Compiled {
            backend,
            options: options.to_vec(),
            symbol: symbol.to_string(),
            function: function.clone(),
        });
        Ok(function)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // the guarded lists are only appended to whole, so a panic elsewhere leaves them valid
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The argument signature calls share a [`Prepared`] by.
#[derive(PartialEq, Eq, Hash)]
enum Signature {
    Elementwise {
        ins: Vec<ArgSpec>,
        outs: Option<Vec<ArgSpec>>,
        size: Option<usize>,
        block: Option<u32>,
    },
    Reduction {
        ins: Vec<ArgSpec>,
        outs: Vec<ArgSpec>,
        axis: Axis,
        keepdims: bool,
    },
}

/// One kernel's launches by argument signature (every argument's dtype and shape, `size`,
/// the block size or the reduced axes): a call whose signature was seen before skips
/// binding, source generation, the cache-key hash, the module lookup and the driver's
/// attribute queries, and only fills in its arrays' addresses. One cache serves ONE kernel
/// (the Python package keeps one in each `ElementwiseKernel` and `ReductionKernel`); it
/// holds at most [`LaunchCache::CAPACITY`] signatures and starts over when full.
#[derive(Default)]
pub struct LaunchCache {
    entries: Mutex<HashMap<Signature, Arc<Prepared>>>,
}

impl std::fmt::Debug for LaunchCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LaunchCache")
            .field("signatures", &lock(&self.entries).len())
            .finish()
    }
}

impl LaunchCache {
    /// Signatures kept before the cache starts over.
    pub const CAPACITY: usize = 256;

    /// Signatures held.
    pub fn len(&self) -> usize {
        lock(&self.entries).len()
    }

    /// Whether no signature is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn get_or(&self, key: Signature, make: impl FnOnce() -> Result<Prepared>) -> Result<Arc<Prepared>> {
        if let Some(p) = lock(&self.entries).get(&key) {
            return Ok(p.clone());
        }
        // built outside the lock (binding and source generation take microseconds, and a
        // failure leaves nothing behind)
        let p = Arc::new(make()?);
        let mut e = lock(&self.entries);
        if e.len() >= Self::CAPACITY {
            e.clear();
        }
        Ok(e.entry(key).or_insert(p).clone())
    }
}

fn specs(args: &[DeviceArg]) -> Vec<ArgSpec> {
    args.iter().map(DeviceArg::spec).collect()
}

/// A call's arguments under the kernel's parameter names.
fn named_args<'a>(
    in_names: &'a [Param],
    out_names: &'a [Param],
    inputs: &'a [DeviceArg],
    outputs: &'a [DeviceArg],
) -> Named<'a> {
    let mut named = Named::default();
    named.add(in_names.iter().map(|p| p.name.as_str()), inputs, false);
    named.add(out_names.iter().map(|p| p.name.as_str()), outputs, true);
    named
}

impl ExprLaunch {
    /// Binds `k` to `inputs` (in its input order) and `outputs` (its output order), CuPy's
    /// rules, `size` CuPy's `size=`; `block` threads a block (default
    /// [`ELEMENTWISE_BLOCK`], clamped to 1..=1024). `bind_outputs`: the outputs take part in
    /// binding (arrays the caller passed, CuPy's `out`), else they were allocated from a
    /// binding of the inputs alone and only receive the results.
    pub fn elementwise(
        k: &ElementwiseKernel,
        inputs: &[DeviceArg],
        outputs: &[DeviceArg],
        size: Option<usize>,
        block: Option<u32>,
        bind_outputs: bool,
    ) -> Result<ExprLaunch> {
        Self::elementwise_cached(
            &LaunchCache::default(),
            k,
            inputs,
            outputs,
            size,
            block,
            bind_outputs,
        )
    }

    /// [`ExprLaunch::elementwise`] through `cache` (`k`'s own).
    pub fn elementwise_cached(
        cache: &LaunchCache,
        k: &ElementwiseKernel,
        inputs: &[DeviceArg],
        outputs: &[DeviceArg],
        size: Option<usize>,
        block: Option<u32>,
        bind_outputs: bool,
    ) -> Result<ExprLaunch> {
        let prepared = cache.get_or(
            Signature::Elementwise {
                ins: specs(inputs),
                outs: bind_outputs.then(|| specs(outputs)),
                size,
                block,
            },
            || {
                // (the key's specs again: a miss pays for them twice, a hit never copies)
                let (ins, outs) = (specs(inputs), bind_outputs.then(|| specs(outputs)));
                let b = k.bind(&ins, outs.as_deref().unwrap_or_default(), size)?;
                Prepared::elementwise(k, &b, block)
            },
        )?;
        let named = named_args(k.in_params(), k.out_params(), inputs, outputs);
        prepared.bind(&named)
    }

    /// [`ExprLaunch::elementwise`] for a binding already made.
    pub(crate) fn elementwise_bound(
        k: &ElementwiseKernel,
        b: &Binding,
        named: &Named<'_>,
        block: Option<u32>,
    ) -> Result<ExprLaunch> {
        Arc::new(Prepared::elementwise(k, b, block)?).bind(named)
    }

    /// Binds the reduction `k` to `inputs` and `outputs` (both taking part in binding) over
    /// `axis` (NumPy's), `keepdims`; one block of [`kiln_expr::REDUCTION_BLOCK`] threads an
    /// output element.
    pub fn reduction(
        k: &ReductionKernel,
        inputs: &[DeviceArg],
        outputs: &[DeviceArg],
        axis: &Axis,
        keepdims: bool,
    ) -> Result<ExprLaunch> {
        Self::reduction_cached(&LaunchCache::default(), k, inputs, outputs, axis, keepdims)
    }

    /// [`ExprLaunch::reduction`] through `cache` (`k`'s own).
    pub fn reduction_cached(
        cache: &LaunchCache,
        k: &ReductionKernel,
        inputs: &[DeviceArg],
        outputs: &[DeviceArg],
        axis: &Axis,
        keepdims: bool,
    ) -> Result<ExprLaunch> {
        let prepared = cache.get_or(
            Signature::Reduction {
                ins: specs(inputs),
                outs: specs(outputs),
                axis: axis.clone(),
                keepdims,
            },
            || {
                let (ins, outs) = (specs(inputs), specs(outputs));
                let rb = k.bind(&ins, &outs, axis, keepdims)?;
                Prepared::reduction(k, &rb)
            },
        )?;
        let named = named_args(k.in_params(), k.out_params(), inputs, outputs);
        prepared.bind(&named)
    }

    /// [`ExprLaunch::reduction`] for a binding already made.
    pub(crate) fn reduction_bound(
        k: &ReductionKernel,
        rb: &ReductionBinding,
        named: &Named<'_>,
    ) -> Result<ExprLaunch> {
        Arc::new(Prepared::reduction(k, rb)?).bind(named)
    }

    /// The generated CUDA source.
    pub fn source(&self) -> &str {
        &self.prepared.source
    }

    /// Loop elements (element-wise) or output elements (reduction); 0: nothing to launch.
    pub fn size(&self) -> usize {
        self.size
    }

    /// The grid (at least one block).
    pub fn grid(&self) -> (u32, u32, u32) {
        (self.grid.max(1), 1, 1)
    }

    /// The block.
    pub fn block(&self) -> (u32, u32, u32) {
        (self.block, 1, 1)
    }

    /// The arguments, in the generated parameter list's order.
    pub fn args(&self) -> &[KernelArg<'static>] {
        &self.args
    }

    /// The kernel compiled for `dev` (NVRTC for its exact arch, or the cubin cache) with
    /// `--fmad=false` (no FMA contraction: the CPU evaluator's bits; an `--fmad` option in
    /// `options` replaces it) and `options`; found again without a lookup when this launch
    /// came through a [`LaunchCache`] that compiled it before.
    pub fn compile(&self, dev: &CudaBackend, options: &[String]) -> Result<UserFunction> {
        self.prepared.function(dev, options, &self.name)
    }

    /// The function [`ExprLaunch::compile`] returns, if an earlier call compiled it already
    /// (a lookup: what a caller can do without releasing the GIL).
    pub fn compiled(&self, dev: &CudaBackend, options: &[String]) -> Option<UserFunction> {
        self.prepared.compiled(dev, options, &self.name)
    }

    /// Compiles (see [`ExprLaunch::compile`]) and queues the kernel on `dev`'s current
    /// stream; nothing when [`ExprLaunch::size`] is 0.
    pub fn queue(&self, dev: &CudaBackend, options: &[String]) -> Result<()> {
        if self.size == 0 {
            return Ok(());
        }
        self.compile(dev, options)?
            .launch(dev, self.grid(), self.block(), 0, &self.args)
    }
}

/// NVRTC options of a generated kernel: `--fmad=false` unless `extra` sets `--fmad`, then
/// `extra`.
fn nvrtc_options(extra: &[String]) -> Vec<String> {
    let mut opts = Vec::with_capacity(extra.len() + 1);
    if !extra
        .iter()
        .any(|o| o.starts_with("--fmad") || o.starts_with("-fmad"))
    {
        opts.push("--fmad=false".to_string());
    }
    opts.extend(extra.iter().cloned());
    opts
}

/// The launch arguments for the generated kernel's parameters.
fn args(
    named: &Named<'_>,
    params: &[KernelParam],
    g: &Geometry,
    kernel: &str,
) -> Result<Vec<KernelArg<'static>>> {
    let missing = |what: &str, name: &str| {
        Error::invalid(
            kernel,
            format!("the generated kernel takes the {what} `{name}`, which the call does not have"),
        )
    };
    let array = |name: &str| named.array(name).ok_or_else(|| missing("array", name));
    let scalar = |name: &str| named.scalar(name).ok_or_else(|| missing("scalar", name));
    let int = |v: i64| KernelArg::Scalar(CudaScalar::I64(v));
    params
        .iter()
        .map(|p| {
            Ok(match p {
                KernelParam::Array { name, dtype, .. } => {
                    let a = array(name)?;
                    KernelArg::external(a.ptr, storage_type(*dtype), a.len())
                }
                KernelParam::Scalar { name, dtype } => {
                    let s = scalar(name)?;
                    KernelArg::Scalar(cuda_scalar(s.cast(*dtype)))
                }
                KernelParam::ScalarImag { name, dtype } => {
                    let s = scalar(name)?;
                    KernelArg::Scalar(cuda_scalar(s.cast(*dtype).imag()))
                }
                KernelParam::Size => int(g.size as i64),
                KernelParam::ReduceSize => int(g.reduce_size as i64),
                KernelParam::Extent { axis } => int(g.extents.get(*axis).copied().unwrap_or(1) as i64),
                KernelParam::Stride { name, axis } => {
                    let a = array(name)?;
                    let b_axis = g.loop_axes.get(*axis).copied().unwrap_or(*axis);
                    int(broadcast_stride(a, g.rank, b_axis))
                }
                KernelParam::RawLen { name } => int(array(name)?.len() as i64),
                #[allow(unreachable_patterns)]
                other => {
                    return Err(Error::invalid(
                        kernel,
                        format!("the generated kernel's parameter {other:?} is not one kiln fills"),
                    ))
                }
            })
        })
        .collect()
}

/// The stride (in elements) of `a` along axis `b_axis` of a broadcast shape of rank `rank`:
/// 0 where the array is broadcast (a missing leading axis or an extent of 1), NumPy's rule;
/// the array's own stride otherwise.
fn broadcast_stride(a: &DeviceArray, rank: usize, b_axis: usize) -> i64 {
    let off = rank.max(a.shape.len()) - a.shape.len();
    if b_axis < off || a.shape.get(b_axis - off).is_none_or(|&e| e == 1) {
        return 0;
    }
    a.strides.get(b_axis - off).copied().unwrap_or(0) as i64
}

/// kiln-cuda's element type for an array of `t` as the generated source declares it (half
/// as its 16-bit storage).
fn storage_type(t: ScalarType) -> CudaType {
    match t {
        ScalarType::Bool => CudaType::Bool,
        ScalarType::I8 => CudaType::I8,
        ScalarType::I16 => CudaType::I16,
        ScalarType::I32 => CudaType::I32,
        ScalarType::I64 => CudaType::I64,
        ScalarType::U8 => CudaType::U8,
        ScalarType::U16 | ScalarType::F16 => CudaType::U16,
        ScalarType::U32 => CudaType::U32,
        ScalarType::U64 => CudaType::U64,
        ScalarType::F32 => CudaType::F32,
        ScalarType::F64 => CudaType::F64,
        // a complex array is passed as a pointer to its parts
        ScalarType::C64 => CudaType::F32,
        ScalarType::C128 => CudaType::F64,
    }
}

/// A scalar as the generated kernel takes it (a half scalar as `float`).
fn cuda_scalar(s: Scalar) -> CudaScalar {
    match s {
        Scalar::Bool(x) => CudaScalar::Bool(x),
        Scalar::I8(x) => CudaScalar::I8(x),
        Scalar::I16(x) => CudaScalar::I16(x),
        Scalar::I32(x) => CudaScalar::I32(x),
        Scalar::I64(x) => CudaScalar::I64(x),
        Scalar::U8(x) => CudaScalar::U8(x),
        Scalar::U16(x) => CudaScalar::U16(x),
        Scalar::U32(x) => CudaScalar::U32(x),
        Scalar::U64(x) => CudaScalar::U64(x),
        Scalar::F16(x) => CudaScalar::F32(x.to_f32()),
        Scalar::F32(x) => CudaScalar::F32(x),
        Scalar::F64(x) => CudaScalar::F64(x),
        // a complex scalar is two parameters: this real part, then `KernelParam::ScalarImag`
        Scalar::C64(..) | Scalar::C128(..) => cuda_scalar(s.real()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arr(shape: &[usize]) -> DeviceArray {
        DeviceArray::contiguous(0x1000, ScalarType::F32, shape)
    }

    #[test]
    fn broadcast_strides_follow_numpy() {
        // (3, 1) against (2, 3, 4): axis 0 missing, axis 1 of extent 3, axis 2 broadcast
        assert_eq!(broadcast_stride(&arr(&[3, 1]), 3, 0), 0);
        assert_eq!(broadcast_stride(&arr(&[3, 1]), 3, 1), 1);
        assert_eq!(broadcast_stride(&arr(&[3, 1]), 3, 2), 0);
        assert_eq!(broadcast_stride(&arr(&[2, 3, 4]), 3, 0), 12);
        assert_eq!(broadcast_stride(&arr(&[2, 3, 4]), 3, 2), 1);
        // a strided view keeps its own strides
        let mut t = arr(&[2, 3]);
        t.strides = vec![1, 2];
        assert_eq!(broadcast_stride(&t, 2, 0), 1);
        assert_eq!(broadcast_stride(&t, 2, 1), 2);
    }

    #[test]
    fn fmad_is_off_unless_the_caller_sets_it() {
        assert_eq!(nvrtc_options(&[]), ["--fmad=false"]);
        let o = vec!["--fmad=true".to_string(), "-DX=1".to_string()];
        assert_eq!(nvrtc_options(&o), o);
        assert_eq!(nvrtc_options(&["-DX=1".to_string()]), ["--fmad=false", "-DX=1"]);
    }

    #[test]
    fn a_launch_over_device_arrays_fills_every_parameter() {
        let k = ElementwiseKernel::new("T x, T y, T a", "T z", "z = a * x + y", "axpy").unwrap();
        let x = DeviceArg::Array(arr(&[2, 3]));
        let y = DeviceArg::Array(DeviceArray::contiguous(0x2000, ScalarType::F32, &[3]));
        let a = DeviceArg::Scalar(Scalar::F64(2.0));
        let z = DeviceArg::Array(DeviceArray::contiguous(0x3000, ScalarType::F32, &[2, 3]));
        let l = ExprLaunch::elementwise(&k, &[x, y, a], &[z], None, Some(4096), true).unwrap();
        assert_eq!(l.size(), 6);
        assert_eq!((l.grid(), l.block()), ((1, 1, 1), (1024, 1, 1)));
        assert!(l.source().contains("axpy"));
        assert_eq!(
            l.args().len(),
            k.kernel_params(
                &k.bind(
                    &[
                        ArgSpec::Array {
                            dtype: ScalarType::F32,
                            shape: vec![2, 3]
                        },
                        ArgSpec::Array {
                            dtype: ScalarType::F32,
                            shape: vec![3]
                        },
                        ArgSpec::Scalar(ScalarType::F64),
                    ],
                    &[],
                    None
                )
                .unwrap()
            )
            .len()
        );
        // the scalar is passed in the bound type (T = float32)
        assert!(l
            .args()
            .iter()
            .any(|a| matches!(a, KernelArg::Scalar(CudaScalar::F32(v)) if *v == 2.0)));
    }

    #[test]
    fn a_complex_scalar_is_passed_as_its_two_parts() {
        let k = ElementwiseKernel::new("T x, T a", "T z", "z = a * x", "cscale").unwrap();
        let c = |p: u64| DeviceArray::contiguous(p, ScalarType::C64, &[5]);
        let a = DeviceArg::Scalar(Scalar::C128(1.5, -2.5));
        let l = ExprLaunch::elementwise(
            &k,
            &[DeviceArg::Array(c(0x1000)), a],
            &[DeviceArg::Array(c(0x2000))],
            None,
            Some(4096),
            true,
        )
        .unwrap();
        // T = complex64: the arrays are pointers to float parts, the scalar two floats
        let floats: Vec<f32> = l
            .args()
            .iter()
            .filter_map(|a| match a {
                KernelArg::Scalar(CudaScalar::F32(v)) => Some(*v),
                _ => None,
            })
            .collect();
        assert_eq!(floats, [1.5, -2.5]);
    }

    #[test]
    fn a_cache_binds_each_signature_once_and_fills_every_call() {
        let k = ElementwiseKernel::new("T x, T y, T a", "T z", "z = a * x + y", "axpy").unwrap();
        let f = |p: u64, n: usize| DeviceArg::Array(DeviceArray::contiguous(p, ScalarType::F32, &[n]));
        let a = DeviceArg::Scalar(Scalar::F32(2.0));
        let cache = LaunchCache::default();
        let call = |x: u64, n: usize| {
            ExprLaunch::elementwise_cached(
                &cache,
                &k,
                &[f(x, n), f(0x2000, n), a.clone()],
                &[f(0x3000, n)],
                None,
                None,
                true,
            )
            .unwrap()
        };
        let (l1, l2) = (call(0x1000, 4096), call(0x5000, 4096));
        assert_eq!(cache.len(), 1);
        assert!(Arc::ptr_eq(&l1.prepared, &l2.prepared));
        // each call's own addresses
        let ptrs = |l: &ExprLaunch| -> Vec<u64> {
            l.args()
                .iter()
                .filter_map(|a| match a {
                    KernelArg::External(e) => Some(e.ptr()),
                    _ => None,
                })
                .collect()
        };
        assert_eq!(ptrs(&l1)[0], 0x1000);
        assert_eq!(ptrs(&l2)[0], 0x5000);
        // aligned: the vector form; an address off its vector alignment: the scalar kernel,
        // from the same cached entry
        assert_eq!(l1.name, "axpy_vec");
        let l3 = call(0x1004, 4096);
        assert_eq!((l3.name.as_str(), cache.len()), ("axpy", 1));
        // another shape is another signature, and its own loop size
        let l4 = call(0x1000, 7);
        assert_eq!((cache.len(), l4.size()), (2, 7));
        // a binding error is returned and nothing is kept
        let bad = ExprLaunch::elementwise_cached(
            &cache,
            &k,
            &[f(0x1000, 3), f(0x2000, 4), a.clone()],
            &[],
            None,
            None,
            false,
        );
        assert!(bad.is_err());
        assert_eq!(cache.len(), 2);
    }
}
