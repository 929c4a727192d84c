//! An expression kernel bound to arrays in device memory: the generated source, the launch
//! shape and every argument of the generated parameter list, filled from the arrays'
//! addresses, shapes and strides. [`Runtime::elementwise_kernel`](crate::Runtime::elementwise_kernel)
//! and [`Runtime::reduction_kernel`](crate::Runtime::reduction_kernel) build one over the
//! arrays they upload; the Python package builds one over CuPy's or torch's arrays in place
//! and queues it on the caller's stream.

use crate::device::CudaBackend;
use kiln_core::Result;
use kiln_cuda::user::{KernelArg, UserFunction};
use kiln_expr::{
    ArgSpec, Axis, Binding, ElementwiseKernel, KernelParam, Param, ReductionBinding, ReductionKernel,
    VectorPlan,
};
use std::collections::HashMap;

use super::args::{kernel_args, DeviceArg, Named};
use std::sync::{Arc, Mutex};

/// Threads per block of an element-wise launch unless the caller picks (the generated loop
/// is grid-stride, so any block size covers every element; CuPy's default).
pub const ELEMENTWISE_BLOCK: u32 = 128;

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
        let args = kernel_args(named, &self.params, &self.geometry, &self.name)?;
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

#[cfg(test)]
mod tests {
    use super::super::args::DeviceArray;
    use super::*;
    use kiln_cuda::user::Scalar as CudaScalar;
    use kiln_expr::{Scalar, ScalarType};

    fn arr(shape: &[usize]) -> DeviceArray {
        DeviceArray::contiguous(0x1000, ScalarType::F32, shape)
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
