//! Kernels as values: kiln's own kernel table, the on-disk cubin cache and cold start
//! behind it, and the types of users' CUDA C++ kernels (element types, parameter lists,
//! launch arguments, compiled modules), for the tools that list, warm, check or launch them
//! (`kiln kernels`, `kiln cache`, `kiln kernel check`, the service's `raw` jobs, Python's
//! `RawModule`). Users who only run a kernel reach it through
//! [`Runtime::raw_kernel`](crate::Runtime::raw_kernel) instead.

/// Every kernel kiln launches, declared once (source module, symbol, parameters, launch
/// shape); `Kernel::ALL` lists them.
pub use kiln_cuda::Kernel;

/// What the driver reports for one kiln kernel's cubin, and its occupancy.
pub use kiln_cuda::attributes::KernelAttributes;

/// A device's per-SM limits that occupancy is measured against.
pub use kiln_cuda::attributes::SmLimits;

/// The on-disk cubin cache (keyed by source, options, arch and NVRTC version).
pub use kiln_cuda::KernelCache;

/// One cache lookup: the program, the arch, the outcome, the time and the file.
pub use kiln_cuda::CacheEvent;

/// How a cache lookup ended: a hit, a compile, a recompile (and why), or a compile that
/// could not be stored.
pub use kiln_cuda::Outcome;

/// How much of an arch's cold start the cache already covers, and what the rest costs.
pub use kiln_cuda::coldstart::Census;

/// Count the cached cubins of every kernel for an arch and NVRTC version ([`Census`]).
pub use kiln_cuda::coldstart::census;

/// Compile (or find cached) the given kernels for an arch without a GPU, one per CPU.
pub use kiln_cuda::coldstart::compile_all;

/// The threads [`compile_all`] compiles on (one per CPU).
pub use kiln_cuda::coldstart::threads as compile_threads;

/// A user kernel's source with its NVRTC options, name expressions and link libraries.
pub use kiln_cuda::user::UserSource;

/// A user's compiled module on one device (from source, or a cubin, PTX or fatbin image).
pub use kiln_cuda::user::UserModule;

/// One kernel of a [`UserModule`]: attributes, parameter list, checked launches.
pub use kiln_cuda::user::UserFunction;

/// One launch argument of a user kernel: a scalar, a kiln buffer or another library's
/// device array.
pub use kiln_cuda::user::KernelArg;

/// A scalar launch argument in the parameter's C type (the root's [`Scalar`](crate::Scalar)).
pub use kiln_cuda::user::Scalar;

/// An element type a user kernel's parameter can name (`float`, `int`, `__half`, ...).
pub use kiln_cuda::user::ScalarType;

/// A user kernel parameter's type: a pointer to an element type, or a scalar by value.
pub use kiln_cuda::user::ParamType;

/// Users' kernels' parameter lists read from CUDA C++ source, without a compiler.
pub mod signature {
    /// Every `__global__` function of a source and its parameter list (or why it cannot
    /// be read).
    pub use kiln_cuda::user::signature::kernels;

    /// A parameter list written out (`"const float* x, int n"`), as a launch checks it.
    pub use kiln_cuda::user::signature::parse_params;

    /// One parameter: its declaration text and type.
    pub use kiln_cuda::user::signature::Param;

    /// One kernel's parameters.
    pub use kiln_cuda::user::signature::Signature;
}

/// What a compiled user kernel costs an SM (from `ptxas`'s report) and the occupancy that
/// allows, without a GPU.
pub mod resources {
    /// Registers, shared, constant and local memory, and spills of one kernel.
    pub use kiln_cuda::user::resources::KernelResources;

    /// The occupancy of a kernel at a block size and dynamic shared memory, and what limits it.
    pub use kiln_cuda::user::resources::occupancy;

    /// An occupancy: the fraction of the SM's warps and the limiting resource.
    pub use kiln_cuda::user::resources::Occupancy;

    /// The per-SM limits of an arch (`sm_90`), from the compute capability tables.
    pub use kiln_cuda::user::resources::sm_limits;

    /// Per-SM limits of an arch, as [`sm_limits`] returns them.
    pub use kiln_cuda::user::resources::SmLimits;
}
