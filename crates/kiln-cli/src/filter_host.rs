//! Host buffers and device transfers for the filter commands, and the runtime started in
//! the background.
//!
//! - [`HostData`]: samples of the stored type (u8, u16, f32) in a `Vec` or in pinned memory
//!   (`Runtime::pinned`: the device's pinned pool, which caches freed blocks, so a batch
//!   reuses the same few). [`Alloc`] hands out pinned buffers once a CUDA runtime is up, and
//!   `Vec`s of 32 MiB or more first touched by all cores (`host_vec`), so neither a read
//!   into them nor a download pays page faults on one thread.
//! - [`upload`] / [`download`]: to and from tensors. A pinned buffer moves into the tensor
//!   (`Runtime::tensor_from_pinned`: one DMA, the buffer held until it has been read); a
//!   `Vec` is copied (staged through pinned chunks when large) and given back, to receive
//!   the result. On the CPU the `Vec` moves into the tensor and the result is read in place
//!   ([`OutData::Cpu`]), so nothing is copied.
//! - [`RuntimeStart`]: `Runtime::new` on its own thread, so creating the CUDA context
//!   (about 370 ms on the H200 machine) overlaps reading and decoding the input.

use kiln::memory::PinnedBuffer;
use kiln::memory::RegisteredVec;
use kiln::{Config, DType, DeviceRequest, Runtime, Tensor};
use kiln_io::{SampleType, SamplesMut, SamplesRef};
use std::ops::{Deref, DerefMut};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

/// Host memory for samples: a `Vec` or a pinned block.
pub(crate) enum HostBuf<T> {
    /// Pageable memory.
    Vec(Vec<T>),
    /// Pinned memory from the CUDA backend's pool (back to the pool on drop).
    Pinned(PinnedBuffer<T>),
    /// A `Vec` page-locked in place for its copies ([`upload`]).
    Registered(RegisteredVec<T>),
}

impl<T> Deref for HostBuf<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        match self {
            HostBuf::Vec(v) => v,
            HostBuf::Pinned(p) => p,
            HostBuf::Registered(r) => r,
        }
    }
}

impl<T> DerefMut for HostBuf<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        match self {
            HostBuf::Vec(v) => v,
            HostBuf::Pinned(p) => p,
            HostBuf::Registered(r) => r,
        }
    }
}

/// Samples of one stored type in host memory.
pub(crate) enum HostData {
    U8(HostBuf<u8>),
    U16(HostBuf<u16>),
    F32(HostBuf<f32>),
}

/// Run `$body` with `$b` bound to the `HostBuf` of whatever type `$d` holds.
macro_rules! with_host {
    ($d:expr, |$b:ident| $body:expr) => {
        match $d {
            HostData::U8($b) => $body,
            HostData::U16($b) => $body,
            HostData::F32($b) => $body,
        }
    };
}
pub(crate) use with_host;

impl HostData {
    pub(crate) fn sample_type(&self) -> SampleType {
        match self {
            HostData::U8(_) => SampleType::U8,
            HostData::U16(_) => SampleType::U16,
            HostData::F32(_) => SampleType::F32,
        }
    }

    pub(crate) fn len(&self) -> usize {
        with_host!(self, |b| b.len())
    }

    pub(crate) fn samples(&self) -> SamplesRef<'_> {
        match self {
            HostData::U8(b) => SamplesRef::U8(b),
            HostData::U16(b) => SamplesRef::U16(b),
            HostData::F32(b) => SamplesRef::F32(b),
        }
    }

    pub(crate) fn samples_mut(&mut self) -> SamplesMut<'_> {
        match self {
            HostData::U8(b) => SamplesMut::U8(b),
            HostData::U16(b) => SamplesMut::U16(b),
            HostData::F32(b) => SamplesMut::F32(b),
        }
    }
}

pub(crate) fn dtype_of(st: SampleType) -> DType {
    match st {
        SampleType::U8 => DType::U8,
        SampleType::U16 => DType::U16,
        SampleType::F32 => DType::F32,
    }
}

fn sample_type_of(d: DType) -> anyhow::Result<SampleType> {
    Ok(match d {
        DType::U8 => SampleType::U8,
        DType::U16 => SampleType::U16,
        DType::F32 => SampleType::F32,
        other => anyhow::bail!("internal: a filter result of dtype {other}"),
    })
}

/// Bytes from which a `Vec` is first touched by all cores (`host_vec`) rather than left to
/// fault page by page.
const TOUCH_FROM: usize = 32 << 20;

/// Hands out host buffers: pinned when it has a CUDA runtime, else `Vec`s.
#[derive(Clone, Copy, Default)]
pub(crate) struct Alloc<'a> {
    rt: Option<&'a Runtime>,
}

impl<'a> Alloc<'a> {
    /// `Vec`s only.
    pub(crate) fn pageable() -> Self {
        Alloc { rt: None }
    }

    /// Pinned buffers from `rt`'s pool when it is a CUDA runtime, else `Vec`s.
    pub(crate) fn for_runtime(rt: &'a Runtime) -> Self {
        Alloc {
            rt: rt.cuda().is_some().then_some(rt),
        }
    }

    /// `n` samples of `st` (contents unspecified: zeros or a reused block's old data).
    pub(crate) fn host(&self, st: SampleType, n: usize) -> anyhow::Result<HostData> {
        fn one<T: kiln::TensorElement + Copy + Default + Send + Sync>(
            rt: Option<&Runtime>,
            n: usize,
        ) -> anyhow::Result<HostBuf<T>> {
            Ok(match rt {
                Some(rt) => HostBuf::Pinned(rt.pinned::<T>(n)?),
                None if n * std::mem::size_of::<T>() >= TOUCH_FROM => HostBuf::Vec(kiln::memory::host_vec(n)),
                None => HostBuf::Vec(vec![T::default(); n]),
            })
        }
        Ok(match st {
            SampleType::U8 => HostData::U8(one(self.rt, n)?),
            SampleType::U16 => HostData::U16(one(self.rt, n)?),
            SampleType::F32 => HostData::F32(one(self.rt, n)?),
        })
    }
}

/// A tensor of `shape` holding `data`, and the buffer back unless it moved into the tensor
/// (a pinned buffer, or a `Vec` on the CPU).
pub(crate) fn upload(
    rt: &Runtime,
    data: HostData,
    shape: &[usize],
) -> anyhow::Result<(Tensor, Option<HostData>)> {
    match data {
        HostData::U8(HostBuf::Pinned(p)) => return Ok((rt.tensor_from_pinned(Arc::new(p), shape)?, None)),
        HostData::U16(HostBuf::Pinned(p)) => return Ok((rt.tensor_from_pinned(Arc::new(p), shape)?, None)),
        HostData::F32(HostBuf::Pinned(p)) => return Ok((rt.tensor_from_pinned(Arc::new(p), shape)?, None)),
        _ => {}
    }
    if rt.cuda().is_none() {
        if let HostData::U8(HostBuf::Vec(v)) = data {
            return Ok((rt.tensor_from_vec(v, shape)?, None));
        }
        if let HostData::U16(HostBuf::Vec(v)) = data {
            return Ok((rt.tensor_from_vec(v, shape)?, None));
        }
        if let HostData::F32(HostBuf::Vec(v)) = data {
            return Ok((rt.tensor_from_vec(v, shape)?, None));
        }
        // pinned memory only exists with a CUDA runtime
        anyhow::bail!("internal: a pinned buffer on the CPU runtime");
    }
    let data = register(rt, data);
    let t = with_host!(&data, |b| rt.tensor(&b[..], shape)?);
    Ok((t, Some(data)))
}

/// Bytes from which [`upload`] page-locks a `Vec` in place for its copies.
const REGISTER_FROM: usize = 32 << 20;

/// `data` page-locked in place when it is a large `Vec` on a CUDA runtime (as it is when
/// the input was read before the runtime was up): its upload is then one DMA, and the
/// result downloads into it as one DMA too, where staged copies in a fresh process first
/// pin buffers of their own (docs/performance.md, "first use"). Where the driver refuses,
/// the `Vec` is kept and the copies are staged.
fn register(rt: &Runtime, data: HostData) -> HostData {
    fn one<T: Copy>(rt: &Runtime, b: HostBuf<T>) -> HostBuf<T> {
        match (b, rt.cuda()) {
            (HostBuf::Vec(v), Some(cuda)) if std::mem::size_of_val(&v[..]) >= REGISTER_FROM => {
                match cuda.register_vec(v) {
                    Ok(r) => HostBuf::Registered(r),
                    Err((v, _)) => HostBuf::Vec(v),
                }
            }
            (b, _) => b,
        }
    }
    match data {
        HostData::U8(b) => HostData::U8(one(rt, b)),
        HostData::U16(b) => HostData::U16(one(rt, b)),
        HostData::F32(b) => HostData::F32(one(rt, b)),
    }
}

impl HostData {
    /// The same samples with a registered `Vec` unregistered (a plain `Vec` again): done
    /// before the result is written, so the context's release, which a registration
    /// holds back, stays on the teardown thread.
    pub(crate) fn unregistered(self) -> HostData {
        fn one<T: Copy>(b: HostBuf<T>) -> HostBuf<T> {
            match b {
                HostBuf::Registered(r) => HostBuf::Vec(r.into_vec()),
                b => b,
            }
        }
        match self {
            HostData::U8(b) => HostData::U8(one(b)),
            HostData::U16(b) => HostData::U16(one(b)),
            HostData::F32(b) => HostData::F32(one(b)),
        }
    }

    /// Whether the samples are a registered `Vec`.
    pub(crate) fn is_registered(&self) -> bool {
        with_host!(self, |b| matches!(b, HostBuf::Registered(_)))
    }
}

/// A filter result in host memory: a buffer, or a CPU tensor read in place.
pub(crate) enum OutData {
    Host(HostData),
    Cpu(Tensor),
}

impl OutData {
    pub(crate) fn samples(&self) -> anyhow::Result<SamplesRef<'_>> {
        Ok(match self {
            OutData::Host(h) => h.samples(),
            OutData::Cpu(t) => match t.dtype() {
                DType::U8 => SamplesRef::U8(t.as_slice()?),
                DType::U16 => SamplesRef::U16(t.as_slice()?),
                DType::F32 => SamplesRef::F32(t.as_slice()?),
                other => anyhow::bail!("internal: a filter result of dtype {other}"),
            },
        })
    }

    pub(crate) fn sample_type(&self) -> anyhow::Result<SampleType> {
        match self {
            OutData::Host(h) => Ok(h.sample_type()),
            OutData::Cpu(t) => sample_type_of(t.dtype()),
        }
    }
}

/// `t` in host memory: read in place on the CPU; on a device, downloaded into `reuse` when
/// it has the same type and length, else into a buffer from `alloc`.
pub(crate) fn download(t: &Tensor, reuse: Option<HostData>, alloc: &Alloc<'_>) -> anyhow::Result<OutData> {
    if t.device() == kiln::Device::Cpu {
        return Ok(OutData::Cpu(t.clone()));
    }
    let st = sample_type_of(t.dtype())?;
    let mut out = match reuse {
        Some(r) if r.sample_type() == st && r.len() == t.len() => r,
        _ => alloc.host(st, t.len())?,
    };
    with_host!(&mut out, |b| t.to_host_into(&mut b[..])?);
    Ok(OutData::Host(out))
}

/// `Runtime::new` on a thread of its own (see the module docs).
pub(crate) struct RuntimeStart {
    handle: Option<JoinHandle<kiln::Result<Runtime>>>,
    started: Instant,
}

impl RuntimeStart {
    pub(crate) fn spawn(request: DeviceRequest, cfg: &Config) -> Self {
        let cfg = cfg.clone();
        let started = Instant::now();
        let handle = std::thread::Builder::new()
            .name("kiln-runtime".into())
            .spawn(move || Runtime::new(request, &cfg))
            .ok();
        RuntimeStart { handle, started }
    }

    /// The runtime (or its error, as `Runtime::new` gives it) and the seconds it took.
    pub(crate) fn join(mut self) -> anyhow::Result<(Runtime, f64)> {
        let rt = match self.handle.take() {
            Some(h) => h
                .join()
                .map_err(|_| anyhow::anyhow!("internal: the runtime thread panicked"))??,
            None => anyhow::bail!("internal: could not start a thread to create the runtime"),
        };
        Ok((rt, self.started.elapsed().as_secs_f64()))
    }
}

impl Drop for RuntimeStart {
    /// On an error path the runtime is not wanted, but the thread may be inside the driver:
    /// let it finish rather than exit the process under it.
    fn drop(&mut self) {
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// Runs `write` while the runtime is torn down on another thread (device memory freed,
/// the context released), and waits for both, so the teardown overlaps the write. The
/// results are host buffers by then, none of them tied to the runtime. Returns `write`'s
/// result and the seconds the teardown took.
///
/// Measured on an H100 host (2026-12-05, performance.md History): the teardown takes
/// 56–108 ms, about as long as a 256 MiB write. Leaving the runtime to the process's exit
/// instead was slower (the exit then releases the context after the write: 470–527 ms
/// whole process against 394–452), and so was no faster with the exit handlers skipped.
pub(crate) fn while_dropping<T>(rt: kiln::Runtime, write: impl FnOnce() -> T) -> (T, f64) {
    let teardown = std::thread::Builder::new()
        .name("kiln-teardown".into())
        .spawn(move || {
            let t = Instant::now();
            drop(rt);
            t.elapsed().as_secs_f64()
        });
    let r = write();
    let s = teardown.ok().and_then(|h| h.join().ok()).unwrap_or(0.0);
    (r, s)
}
