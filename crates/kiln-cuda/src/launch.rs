//! The one launch path for kiln's own kernels: [`CudaBackend::launch`] (current stream) and
//! [`CudaBackend::launch_on`] (a given stream) check the arguments against the kernel's
//! declared parameters ([`Kernel::params`]), open the profiler range named by the kernel's
//! symbol on the launch's stream, launch through cudarc, and map a launch failure to
//! [`kiln_core::Error::Cuda`] with the symbol as the op (so `is_sticky` classifies it as it
//! classifies every driver error).
//!
//! An argument is an [`Arg`]: a device pointer with its element type, a scalar of its Rust
//! type, or a `#[repr(C)]` struct by value ([`KernelStruct`]). Each is pushed as the value it
//! holds, so a launcher passes exactly the bits it built; the check is a guard against a
//! launcher and a declaration drifting apart (an `InvalidArgument` naming the kernel and the
//! parameter, before anything is enqueued).
//!
//! What a launcher still owes: sizes. The helper cannot know how many elements a kernel
//! touches through a pointer; each launcher checks its buffers against its shape first, and
//! says so where the reasoning is specific to the kernel.
#![allow(unsafe_code)]

use crate::kernels::{Kernel, KernelParam, ScalarType};
use crate::pool::DeviceBuffer;
use crate::CudaBackend;
use cudarc::driver::{CudaStream, DeviceRepr, LaunchArgs, LaunchConfig, PushKernelArg};
use kiln_core::backend::{bf16, f16};
use kiln_core::{Error, HasDType, Result};
use std::sync::Arc;

/// A Rust element type and the kernel element type with the same bits.
pub(crate) trait DeviceScalar: Copy {
    /// The kernel-side type.
    const TYPE: ScalarType;
}

macro_rules! device_scalar {
    ($($t:ty => $v:ident),*) => {$(
        impl DeviceScalar for $t {
            const TYPE: ScalarType = ScalarType::$v;
        }
    )*};
}
device_scalar!(u8 => U8, u16 => U16, u32 => U32, u64 => U64, i32 => I32, i64 => I64, f16 => F16,
    bf16 => BF16, f32 => F32, f64 => F64);

/// A `#[repr(C)]` struct passed by value: the twin of the C struct `C_NAME` of the kernel
/// sources (same fields, order and size; the declarations' `KernelParam::Struct` sizes are
/// checked against the source by a test and against `size_of` at compile time).
pub(crate) trait KernelStruct: DeviceRepr {
    /// The C struct's name.
    const C_NAME: &'static str;
}

/// A by-value struct argument, object-safe.
pub(crate) trait StructArg {
    /// The C struct's name.
    fn c_name(&self) -> &'static str;
    /// Its size in bytes.
    fn bytes(&self) -> usize;
    /// Push it onto a launch.
    fn push<'b>(&'b self, l: &mut LaunchArgs<'b>);
    /// The address of its bytes (a `cuLaunchKernelEx` parameter, `graph_pdl.rs`).
    fn as_param(&self) -> *const std::ffi::c_void;
}

impl<T: KernelStruct> StructArg for T {
    fn c_name(&self) -> &'static str {
        T::C_NAME
    }

    fn bytes(&self) -> usize {
        std::mem::size_of::<T>()
    }

    fn push<'b>(&'b self, l: &mut LaunchArgs<'b>) {
        l.arg(self);
    }

    fn as_param(&self) -> *const std::ffi::c_void {
        (self as *const T).cast()
    }
}

/// One launch argument.
pub(crate) enum Arg<'a> {
    /// A device address of elements of `elem` (0 for a null pointer the kernel leaves
    /// unread).
    Ptr {
        /// The address.
        addr: u64,
        /// What it points to.
        elem: ScalarType,
    },
    /// `int`.
    I32(i32),
    /// `unsigned int`.
    U32(u32),
    /// `long long`.
    I64(i64),
    /// `unsigned long long`.
    U64(u64),
    /// `float`.
    F32(f32),
    /// `double`.
    F64(f64),
    /// A struct by value.
    Struct(&'a dyn StructArg),
}

macro_rules! arg_from {
    ($($t:ty => $v:ident),*) => {$(
        impl From<$t> for Arg<'_> {
            fn from(x: $t) -> Self {
                Arg::$v(x)
            }
        }
    )*};
}
arg_from!(i32 => I32, u32 => U32, i64 => I64, u64 => U64, f32 => F32, f64 => F64);

impl<'a> Arg<'a> {
    /// A buffer, as a pointer to its first element.
    pub(crate) fn buf<T: DeviceScalar>(b: &DeviceBuffer<T>) -> Self {
        Arg::ptr(b.device_ptr(), T::TYPE)
    }

    /// A buffer from element `offset` on (the caller keeps the offset inside it).
    pub(crate) fn buf_at<T: DeviceScalar>(b: &DeviceBuffer<T>, offset: u64) -> Self {
        Arg::ptr(b.device_ptr() + offset * std::mem::size_of::<T>() as u64, T::TYPE)
    }

    /// A buffer of a tensor element type (for launchers generic over the dtype).
    pub(crate) fn tensor<T: HasDType>(b: &DeviceBuffer<T>) -> Self {
        Arg::ptr(b.device_ptr(), ScalarType::of_dtype(T::DTYPE))
    }

    /// A device address of `elem` elements that the caller vouches for.
    pub(crate) fn ptr(addr: u64, elem: ScalarType) -> Self {
        Arg::Ptr { addr, elem }
    }

    /// A struct by value.
    pub(crate) fn by_value<S: KernelStruct>(s: &'a S) -> Self {
        Arg::Struct(s)
    }

    /// What the argument is, for messages.
    fn describe(&self) -> String {
        match self {
            Arg::Ptr { elem, .. } => format!("a pointer to {}", elem.c_name()),
            Arg::I32(_) => "an i32".into(),
            Arg::U32(_) => "a u32".into(),
            Arg::I64(_) => "an i64".into(),
            Arg::U64(_) => "a u64".into(),
            Arg::F32(_) => "an f32".into(),
            Arg::F64(_) => "an f64".into(),
            Arg::Struct(s) => format!("struct {} ({} bytes)", s.c_name(), s.bytes()),
        }
    }

    fn scalar_type(&self) -> Option<ScalarType> {
        Some(match self {
            Arg::I32(_) => ScalarType::I32,
            Arg::U32(_) => ScalarType::U32,
            Arg::I64(_) => ScalarType::I64,
            Arg::U64(_) => ScalarType::U64,
            Arg::F32(_) => ScalarType::F32,
            Arg::F64(_) => ScalarType::F64,
            Arg::Ptr { .. } | Arg::Struct(_) => return None,
        })
    }

    fn push<'b>(&'b self, l: &mut LaunchArgs<'b>) {
        match self {
            Arg::Ptr { addr, .. } => l.arg(addr),
            Arg::I32(v) => l.arg(v),
            Arg::U32(v) => l.arg(v),
            Arg::I64(v) => l.arg(v),
            Arg::U64(v) => l.arg(v),
            Arg::F32(v) => l.arg(v),
            Arg::F64(v) => l.arg(v),
            Arg::Struct(s) => {
                s.push(l);
                l
            }
        };
    }
}

/// Whether `arg` fills `param`: a pointer to the declared element type (any for `void*`;
/// f16 and bf16 buffers fill `u16*`, kiln's kernels carry halves as their bit patterns), a
/// scalar of exactly the declared type, or the declared struct at its declared size.
fn fits(param: KernelParam, arg: &Arg<'_>) -> bool {
    match (param, arg) {
        (KernelParam::Pointer { elem: None, .. }, Arg::Ptr { .. }) => true,
        (KernelParam::Pointer { elem: Some(e), .. }, Arg::Ptr { elem, .. }) => {
            e == *elem || (e == ScalarType::U16 && matches!(elem, ScalarType::F16 | ScalarType::BF16))
        }
        (KernelParam::Scalar(t), a) => a.scalar_type() == Some(t),
        (KernelParam::Struct { name, bytes }, Arg::Struct(s)) => {
            s.c_name() == name && s.bytes() == bytes as usize
        }
        _ => false,
    }
}

/// Checks `args` against `k`'s declared parameters: an `InvalidArgument` naming the kernel
/// and the first parameter that disagrees (a launcher bug, reported before any launch).
pub(crate) fn check_args(k: Kernel, args: &[Arg<'_>]) -> Result<()> {
    let params = k.params();
    if params.len() != args.len() {
        let list: Vec<String> = params.iter().map(|p| p.c_type()).collect();
        return Err(Error::invalid(
            k.symbol(),
            format!(
                "{} launch arguments for its {} parameters ({}): the launcher and the kernel's declaration disagree",
                args.len(),
                params.len(),
                list.join(", ")
            ),
        ));
    }
    for (i, (p, a)) in params.iter().zip(args).enumerate() {
        if !fits(*p, a) {
            return Err(Error::invalid(
                k.symbol(),
                format!(
                    "launch argument {} is {}, parameter {} is `{}`: the launcher and the kernel's declaration disagree",
                    i + 1,
                    a.describe(),
                    i + 1,
                    p.c_type()
                ),
            ));
        }
    }
    Ok(())
}

impl CudaBackend {
    /// Launch `k` on the current stream ([`CudaBackend::stream`]); see [`Self::launch_on`].
    pub(crate) fn launch(&self, k: Kernel, cfg: LaunchConfig, args: &[Arg<'_>]) -> Result<()> {
        self.launch_on(self.stream(), k, cfg, args)
    }

    /// Launch `k` with `cfg` on `stream`: the arguments checked against its declaration,
    /// a profiler range named by its symbol, the launch error mapped by [`Self::launch_err`].
    ///
    /// The caller guarantees what the declaration cannot say: every pointer addresses a
    /// live device allocation of this context holding every element the kernel touches
    /// for this `cfg` and these scalars, distinct where the kernel writes, and kept alive in
    /// `stream`'s order until the kernel has run (pool blocks used on another stream are
    /// recorded on it by the caller); `cfg`'s shared memory is what the kernel expects.
    pub(crate) fn launch_on(
        &self,
        stream: &Arc<CudaStream>,
        k: Kernel,
        cfg: LaunchConfig,
        args: &[Arg<'_>],
    ) -> Result<()> {
        check_args(k, args)?;
        let f = self.function(k)?;
        let _range = self.range_on(k.symbol(), stream);
        if crate::graph_pdl::applies(self, stream, k) {
            return self.launch_programmatic(stream, &f, k, cfg, args);
        }
        let mut l = stream.launch_builder(&f);
        for a in args {
            a.push(&mut l);
        }
        // SAFETY: `f` is `k` loaded into this backend's context, and `stream` belongs to it.
        // The arguments match `k`'s parameters in number, order and type (checked above
        // against its declaration, which a test checks against the source), and each lives
        // in `args` until `launch` returns (the driver copies parameter values at launch).
        // What the memory behind the pointers must satisfy (sizes, liveness in stream order,
        // distinctness) is this function's documented contract, checked by each caller
        // against its shapes before the call.
        unsafe { l.launch(cfg) }.map_err(|e| self.launch_err(k, e))?;
        Ok(())
    }

    /// A failed launch of `k`: the driver's code as [`Error::Cuda`] with the kernel's
    /// symbol as the op, on this device (sticky codes stay sticky).
    pub(crate) fn launch_err(&self, k: Kernel, e: cudarc::driver::DriverError) -> Error {
        self.err(k.symbol(), e)
    }

    /// A new device buffer holding `x`, copied on the current stream.
    pub fn upload_slice<T: Copy>(&self, x: &[T]) -> Result<DeviceBuffer<T>> {
        let mut b = self.alloc(x.len())?;
        b.copy_from_host(x, self.stream())?;
        Ok(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Keys([[u32; 10]; 2]);
    // SAFETY: a plain #[repr(C)] array of u32, as finance.cuh's KilnKeys.
    unsafe impl DeviceRepr for Keys {}
    impl KernelStruct for Keys {
        const C_NAME: &'static str = "KilnKeys";
    }

    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Short([u32; 19]);
    // SAFETY: a plain #[repr(C)] array of u32.
    unsafe impl DeviceRepr for Short {}
    impl KernelStruct for Short {
        const C_NAME: &'static str = "KilnKeys";
    }

    fn reason(e: Error) -> String {
        match e {
            Error::InvalidArgument { op, reason } => format!("{op}: {reason}"),
            e => panic!("expected InvalidArgument, got {e:?}"),
        }
    }

    #[test]
    fn arguments_are_checked_against_the_declaration() {
        let k = Kernel::MC_COMBINE_F64;
        let p = |elem| Arg::ptr(0x1000, elem);
        let ok = [p(ScalarType::F64), 3u32.into(), 7u64.into(), p(ScalarType::F64)];
        assert!(check_args(k, &ok).is_ok());
        // count
        let e = reason(check_args(k, &ok[..3]).expect_err("count"));
        assert!(
            e.starts_with("mc_combine_f64: 3 launch arguments for its 4"),
            "{e}"
        );
        // scalar type: a u64 where the kernel takes a u32
        let bad = [p(ScalarType::F64), 3u64.into(), 7u64.into(), p(ScalarType::F64)];
        let e = reason(check_args(k, &bad).expect_err("scalar"));
        assert!(
            e.contains("argument 2 is a u64, parameter 2 is `unsigned int`"),
            "{e}"
        );
        // element type
        let bad = [p(ScalarType::F32), 3u32.into(), 7u64.into(), p(ScalarType::F64)];
        let e = reason(check_args(k, &bad).expect_err("element"));
        assert!(
            e.contains("argument 1 is a pointer to float, parameter 1 is `const double*`"),
            "{e}"
        );
        // a scalar for a pointer
        let bad = [7u64.into(), 3u32.into(), 7u64.into(), p(ScalarType::F64)];
        assert!(check_args(k, &bad).is_err());
    }

    #[test]
    fn structs_void_and_half_pointers() {
        let keys = Keys([[0; 10]; 2]);
        let short = Short([0; 19]);
        let p = |elem| Arg::ptr(0x1000, elem);
        let args = |keys: Arg<'static>| {
            [
                p(ScalarType::U32),
                p(ScalarType::F64),
                1u32.into(),
                0u64.into(),
                1u64.into(),
                1024u64.into(),
                keys,
                p(ScalarType::F64),
            ]
        };
        let keys: &'static Keys = Box::leak(Box::new(keys));
        let short: &'static Short = Box::leak(Box::new(short));
        assert!(check_args(Kernel::HESTON_BLOCKS_F64, &args(Arg::by_value(keys))).is_ok());
        let e = reason(check_args(Kernel::HESTON_BLOCKS_F64, &args(Arg::by_value(short))).expect_err("size"));
        assert!(
            e.contains("struct KilnKeys (76 bytes), parameter 7 is `KilnKeys`"),
            "{e}"
        );
        // void* takes any element type; u16* takes halves
        let cast = [
            p(ScalarType::F16),
            p(ScalarType::U8),
            5u64.into(),
            2i32.into(),
            4i32.into(),
        ];
        assert!(check_args(Kernel::CAST_ANY, &cast).is_ok());
        for e in [ScalarType::F16, ScalarType::BF16, ScalarType::U16] {
            let args = [p(e), p(e), 9u64.into(), 1.5f32.into()];
            assert!(check_args(Kernel::AXPY_F16, &args).is_ok());
        }
        let args = [p(ScalarType::U8), p(ScalarType::U8), 9u64.into(), 1.5f32.into()];
        assert!(check_args(Kernel::AXPY_F16, &args).is_err());
    }

    #[test]
    fn every_declared_struct_has_its_declared_size() {
        for k in Kernel::ALL {
            for p in k.params() {
                if let KernelParam::Struct { name, bytes } = p {
                    assert!(*bytes > 0 && !name.is_empty(), "{}", k.symbol());
                }
            }
        }
        assert_eq!(
            std::mem::size_of::<Keys>(),
            crate::kernels::decl::KEYS.size_bytes()
        );
    }
}
