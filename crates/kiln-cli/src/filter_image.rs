//! `kiln filter2d` on one file: decode in the stored type, filter on the device, encode.
//! The same steps run per file in batch mode (`filter_batch.rs`).
//!
//! An 8/16-bit image is uploaded as integers (a quarter or half of the f32 bytes), converted
//! on the device (`cast`, exact), filtered in f32 and, for an 8/16-bit output, converted back
//! there (`cast` rounds half away from zero and clamps, NaN to 0: kiln-io's `to_u8`/`to_u16`
//! rule), so only the output's own type crosses the link back. The results are those of
//! the host-slice path before tensors (2026-12-03), bit for bit.

use crate::filter_cmd::{invalid, io_error, progress, Layout2};
use crate::filter_host::{download, dtype_of, upload, with_host, Alloc, HostData, OutData};
use crate::filter_kernel::Filter2;
use kiln::imaging::FilterPath;
use kiln::{DType, Runtime, Stream, Tensor};
use kiln_io::{Format, SampleType};
use std::path::Path;

/// A decoded 2-D input.
pub(crate) struct Image2 {
    /// The samples in their stored type (npy float64: f32), row-major; `(h, w, c)`
    /// interleaved, or `(n, h, w)` planes for a batch.
    pub data: HostData,
    /// The shape as read (the `.npy` shape, or `(H, W)` / `(H, W, C)` of a PNG/TIFF).
    pub shape: Vec<usize>,
    /// `[h, w, c]`, or `[n, h, w]` for a batch.
    pub dims: [usize; 3],
    pub layout: Layout2,
}

impl Image2 {
    pub(crate) fn sample_type(&self) -> SampleType {
        self.data.sample_type()
    }

    /// Images filtered (one, or N for a batch).
    pub(crate) fn items(&self) -> usize {
        if self.layout == Layout2::Batch {
            self.dims[0]
        } else {
            1
        }
    }
}

/// The layout, shape and sample count of `path` from its header, for `read_image2`.
pub(crate) struct Header2 {
    shape: Vec<usize>,
    dims: [usize; 3],
    layout: Layout2,
    sample_type: SampleType,
    source: Source,
}

enum Source {
    Image(kiln_io::ImageFile),
    Npy(kiln_io::NpyFile),
}

impl Header2 {
    /// Samples to decode.
    pub(crate) fn len(&self) -> usize {
        self.dims.iter().product()
    }

    pub(crate) fn sample_type(&self) -> SampleType {
        self.sample_type
    }

    pub(crate) fn dims(&self) -> [usize; 3] {
        self.dims
    }

    pub(crate) fn layout(&self) -> Layout2 {
        self.layout
    }
}

/// Reads `path`'s header and checks it is an image filter2d takes.
pub(crate) fn open_image2(path: &Path, format: Format, batch: bool) -> anyhow::Result<Header2> {
    if format != Format::Npy {
        if batch {
            return Err(invalid("--batch", "--batch applies to a 3-D .npy input only"));
        }
        let f = kiln_io::open_image_file(path).map_err(io_error("--input"))?;
        let info = f.info();
        let (h, w, c) = (info.height, info.width, info.channels);
        let layout = match c {
            1 => Layout2::Gray,
            2 | 4 => Layout2::Channels { alpha: true },
            _ => Layout2::Channels { alpha: false },
        };
        // As an .npy output: (H, W) for gray, as kiln-io writes images.
        let shape = if c == 1 { vec![h, w] } else { vec![h, w, c] };
        return Ok(Header2 {
            shape,
            dims: [h, w, c],
            layout,
            sample_type: info.sample_type,
            source: Source::Image(f),
        });
    }
    let f = kiln_io::open_npy(path).map_err(io_error("--input"))?;
    let shape = f.shape().to_vec();
    let (dims, layout) = match (shape.len(), batch) {
        (2, _) => ([shape[0], shape[1], 1], Layout2::Gray),
        (3, false) => ([shape[0], shape[1], shape[2]], Layout2::Channels { alpha: false }),
        (3, true) => ([shape[0], shape[1], shape[2]], Layout2::Batch),
        (n, _) => {
            return Err(invalid(
                "--input",
                format!(
                    "{}: shape {shape:?} ({n}-D) is not an image; filter2d takes (H, W), (H, W, C) or, \
                     with --batch, (N, H, W){}",
                    path.display(),
                    if n == 4 {
                        "; for volumes use kiln filter3d"
                    } else {
                        ""
                    }
                ),
            ))
        }
    };
    if shape.contains(&0) {
        return Err(invalid(
            "--input",
            format!(
                "{}: empty image (shape {shape:?}); an image must be at least 1x1",
                path.display()
            ),
        ));
    }
    if batch && layout != Layout2::Batch {
        return Err(invalid(
            "--batch",
            format!(
                "{}: --batch needs a 3-D (N, H, W) array, got shape {shape:?}",
                path.display()
            ),
        ));
    }
    let sample_type = f.sample_type();
    Ok(Header2 {
        shape,
        dims,
        layout,
        sample_type,
        source: Source::Npy(f),
    })
}

/// Decodes the pixels into a buffer from `alloc`.
pub(crate) fn read_image2(h: Header2, alloc: &Alloc<'_>) -> anyhow::Result<Image2> {
    let mut data = alloc.host(h.sample_type, h.len())?;
    match h.source {
        Source::Image(f) => f.decode_into(data.samples_mut()).map_err(io_error("--input"))?,
        Source::Npy(f) => f.read_into(data.samples_mut()).map_err(io_error("--input"))?,
    }
    Ok(Image2 {
        data,
        shape: h.shape,
        dims: h.dims,
        layout: h.layout,
    })
}

/// The sample type the output is written in, or why the output format cannot hold it.
pub(crate) fn output_type_2d(
    path: &Path,
    format: Format,
    dims: [usize; 3],
    layout: Layout2,
    st: SampleType,
) -> anyhow::Result<SampleType> {
    let c = dims[2];
    let fail = |why: String| Err(invalid("--output", format!("{}: {why}", path.display())));
    match format {
        Format::Npy => Ok(SampleType::F32),
        _ if layout == Layout2::Batch => {
            fail(format!("a batch of {} images is written as .npy only", dims[0]))
        }
        Format::Png if st == SampleType::F32 => {
            fail("the input is floating point and PNG has no float samples; write .tif or .npy".into())
        }
        Format::Png if !(1..=4).contains(&c) => fail(format!("PNG holds 1 to 4 channels, the input has {c}")),
        Format::Tiff if ![1, 3, 4].contains(&c) => fail(format!(
            "TIFF is written with 1, 3 or 4 channels, the input has {c}{}",
            if c == 2 { " (gray+alpha: write .png)" } else { "" }
        )),
        _ => Ok(st),
    }
}

/// Cast to f32, filter (one gray image, interleaved channels, or an `(n, h, w)` batch),
/// cast to `out` (only for an 8/16-bit output), all queued on the current stream. An op
/// filters the channels as a batch of planes (split and interleaved on the device), and a
/// gray image or batch in its own type when the output has that type (8/16-bit stays so).
fn filter_tensor(t: &Tensor, f: &Filter2, channels: bool, out: SampleType) -> anyhow::Result<Tensor> {
    let p = FilterPath::Auto;
    if let (Filter2::Op(op), false) = (*f, channels) {
        if t.dtype() == dtype_of(out) {
            // 8/16-bit in and out: the op reads and writes the integers on the device
            return Ok(op(t)?);
        }
    }
    let x = t.cast(DType::F32)?;
    let y = match (*f, channels) {
        (Filter2::Kernel(k, mode), true) => x.filter2d_channels(k, mode, p)?,
        (Filter2::Kernel(k, mode), false) => x.filter2d(k, mode, p)?,
        (Filter2::Op(op), false) => op(&x)?,
        (Filter2::Op(op), true) => {
            let [h, w, c] = *x.shape() else {
                anyhow::bail!("internal: channels of shape {:?}", x.shape());
            };
            let planes = x.reshape(&[h * w, c])?.transpose()?.reshape(&[c, h, w])?;
            op(&planes)?
                .reshape(&[c, h * w])?
                .transpose()?
                .reshape(&[h, w, c])?
        }
    };
    Ok(y.cast(dtype_of(out))?)
}

/// `r`, after waiting for the device when it is an error, so that no queued copy still
/// reads a buffer the caller is about to drop.
fn synced<T>(rt: &Runtime, r: anyhow::Result<T>) -> anyhow::Result<T> {
    if r.is_err() {
        let _ = rt.synchronize();
    }
    r
}

/// Where the wall time of a one-file run went, in seconds.
#[derive(serde::Serialize, Default)]
pub(crate) struct Timings {
    /// Reading and decoding the input (overlapped with creating the runtime).
    pub(crate) read_s: f64,
    /// Creating the runtime (the CUDA context), on its own thread from the start.
    pub(crate) runtime_s: f64,
    /// Waiting for the runtime after the input was read.
    pub(crate) runtime_wait_s: f64,
    /// Upload, filter and download (`seconds`).
    pub(crate) filter_s: f64,
    /// Encoding and writing the output.
    pub(crate) write_s: f64,
    /// Releasing the runtime (device memory, the context), beside the write.
    pub(crate) teardown_s: f64,
    /// Where creating a CUDA runtime went, in ms: the driver's probe, the context, and
    /// the wait for libnvrtc (which loads beside both). Absent on the CPU.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) runtime_parts: Option<kiln::device::Startup>,
    /// The one-file device filter's stages (`FilterParts`); absent on the CPU and batches.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) filter_parts: Option<FilterParts>,
}

/// Where a one-file device filter's time went (`--json`'s `timings.filter_parts`): each
/// stage waited for before the next, so first use (pinned staging buffers, device blocks,
/// module loads) shows in the stage that pays it.
#[derive(serde::Serialize, Default, Debug)]
pub(crate) struct FilterParts {
    /// Host buffer to device tensor: registering a large input `Vec` and one DMA, else
    /// staged through pinned chunks.
    pub(crate) upload_s: f64,
    /// The casts and the filter's kernels, module loads included.
    pub(crate) kernels_s: f64,
    /// The result back into the host buffer.
    pub(crate) download_s: f64,
    /// Whether the input's `Vec` was page-locked in place for both copies (`upload`), and
    /// the seconds unregistering it took after the download.
    pub(crate) registered: bool,
    pub(crate) unregister_s: f64,
    /// Pinned blocks this process allocated (staging buffers), and the milliseconds in
    /// `cuMemHostAlloc` and in zero-filling them.
    pub(crate) pinned_allocs: u64,
    pub(crate) pinned_alloc_ms: f64,
    pub(crate) pinned_zero_ms: f64,
    /// Kernel modules this process loaded so far, the cache lookups' milliseconds (reading
    /// the cubin files; compiling on a miss) and `cuModuleLoadData`'s.
    pub(crate) module_loads: usize,
    pub(crate) module_lookup_ms: f64,
    pub(crate) module_load_ms: f64,
}

/// Seconds between stages, each stage's queued work waited for when `on`.
struct Marks<'a> {
    rt: &'a Runtime,
    on: bool,
    t: std::time::Instant,
}

impl<'a> Marks<'a> {
    fn new(rt: &'a Runtime, on: bool) -> Self {
        Marks {
            rt,
            on,
            t: std::time::Instant::now(),
        }
    }

    /// The seconds since the last mark (0 when off), after waiting for the device.
    fn next(&mut self) -> anyhow::Result<f64> {
        if !self.on {
            return Ok(0.0);
        }
        self.rt.synchronize()?;
        let now = std::time::Instant::now();
        let s = (now - self.t).as_secs_f64();
        self.t = now;
        Ok(s)
    }
}

/// The filtered image in `out_type`, on the current stream; on a device the result lands
/// in the input's own buffer when it is a `Vec` of the output's type. Batches of
/// `(n, h, w)` run in chunks of about 16 M pixels, alternating over `streams`, each chunk's
/// download overlapping the next chunk's upload and filter.
///
/// With `parts`, a gray or channels image on a device has its stages waited for one by one
/// and timed there (they run one after another anyway: each needs the one before).
#[allow(clippy::too_many_arguments)]
pub(crate) fn filter_image2(
    rt: &Runtime,
    img: Image2,
    f: &Filter2,
    out_type: SampleType,
    streams: &[Stream],
    alloc: &Alloc<'_>,
    show_progress: bool,
    parts: Option<&mut Option<FilterParts>>,
) -> anyhow::Result<OutData> {
    let [a, b, c] = img.dims;
    match img.layout {
        Layout2::Gray | Layout2::Channels { alpha: false } => {
            let channels = img.layout != Layout2::Gray;
            let shape: &[usize] = if channels { &[a, b, c] } else { &[a, b] };
            let mut mark = Marks::new(rt, parts.is_some());
            let (t, back) = upload(rt, img.data, shape)?;
            let upload_s = mark.next()?;
            let y = synced(rt, filter_tensor(&t, f, channels, out_type))?;
            let kernels_s = mark.next()?;
            let registered = back.as_ref().is_some_and(HostData::is_registered);
            let out = download(&y, back, alloc)?;
            let download_s = mark.next()?;
            drop((t, y));
            let out = match out {
                OutData::Host(h) => OutData::Host(h.unregistered()),
                o => o,
            };
            if let (Some(p), Some(cuda)) = (parts, rt.cuda()) {
                let loads = cuda.module_loads();
                let pinned = cuda.pinned_pool().stats();
                *p = Some(FilterParts {
                    upload_s,
                    kernels_s,
                    download_s,
                    registered,
                    unregister_s: mark.next()?,
                    pinned_allocs: pinned.num_host_allocs,
                    pinned_alloc_ms: pinned.host_alloc_ns as f64 / 1e6,
                    pinned_zero_ms: pinned.zero_fill_ns as f64 / 1e6,
                    module_loads: loads.len(),
                    module_lookup_ms: loads.iter().map(|l| l.cache.ms).sum(),
                    module_load_ms: loads.iter().map(|l| l.load_ms).sum(),
                });
            }
            Ok(out)
        }
        Layout2::Channels { alpha: true } => filter_with_alpha(rt, img, f, out_type, alloc),
        Layout2::Batch => filter_batch_chunks(rt, img, f, out_type, streams, alloc, show_progress),
    }
}

/// Colour channels filtered, the alpha channel (the last) copied unchanged.
fn filter_with_alpha(
    rt: &Runtime,
    img: Image2,
    f: &Filter2,
    out_type: SampleType,
    alloc: &Alloc<'_>,
) -> anyhow::Result<OutData> {
    let [h, w, c] = img.dims;
    let colour = c - 1;
    let mut planes = alloc.host(img.sample_type(), h * w * colour)?;
    fn split<T: Copy>(src: &[T], dst: &mut [T], c: usize) {
        for (px, d) in src.chunks_exact(c).zip(dst.chunks_exact_mut(c - 1)) {
            d.copy_from_slice(&px[..c - 1]);
        }
    }
    match (&img.data, &mut planes) {
        (HostData::U8(s), HostData::U8(d)) => split(s, d, c),
        (HostData::U16(s), HostData::U16(d)) => split(s, d, c),
        (HostData::F32(s), HostData::F32(d)) => split(s, d, c),
        _ => anyhow::bail!("internal: planes of another type"),
    }
    let shape: &[usize] = if colour == 1 { &[h, w] } else { &[h, w, colour] };
    let (t, back) = upload(rt, planes, shape)?;
    let y = synced(rt, filter_tensor(&t, f, colour > 1, out_type))?;
    let done = download(&y, back, alloc)?;
    // Interleave: the filtered colour, then the input's alpha in the output's type (the
    // output is the input's type, or f32 for .npy: an exact conversion either way).
    let mut out = alloc.host(out_type, h * w * c)?;
    fn merge<T: Copy, A: Copy>(out: &mut [T], done: &[T], input: &[A], c: usize, conv: impl Fn(A) -> T) {
        for ((o, d), i) in out
            .chunks_exact_mut(c)
            .zip(done.chunks_exact(c - 1))
            .zip(input.chunks_exact(c))
        {
            o[..c - 1].copy_from_slice(d);
            o[c - 1] = conv(i[c - 1]);
        }
    }
    let done_s = done.samples()?;
    use kiln_io::SamplesRef as S;
    match (&mut out, done_s, &img.data) {
        (HostData::U8(o), S::U8(d), HostData::U8(i)) => merge(o, d, i, c, |v| v),
        (HostData::U16(o), S::U16(d), HostData::U16(i)) => merge(o, d, i, c, |v| v),
        (HostData::F32(o), S::F32(d), HostData::F32(i)) => merge(o, d, i, c, |v| v),
        (HostData::F32(o), S::F32(d), HostData::U8(i)) => merge(o, d, i, c, f32::from),
        (HostData::F32(o), S::F32(d), HostData::U16(i)) => merge(o, d, i, c, f32::from),
        _ => anyhow::bail!("internal: an output of another type"),
    }
    Ok(OutData::Host(out))
}

/// `(n, h, w)` in chunks (see [`filter_image2`]).
fn filter_batch_chunks(
    rt: &Runtime,
    img: Image2,
    f: &Filter2,
    out_type: SampleType,
    streams: &[Stream],
    alloc: &Alloc<'_>,
    show_progress: bool,
) -> anyhow::Result<OutData> {
    let [a, b, c] = img.dims;
    // About 16 M pixels a call, so the bar moves and a call's buffers stay small.
    let plane = b * c;
    let per = (16usize << 20).div_ceil(plane).clamp(1, a);
    let calls = a.div_ceil(per);
    let bar = if show_progress {
        progress(calls, "batches")
    } else {
        None
    };
    let on_device = rt.cuda().is_some();
    // On a device the result lands in the input's buffer when the types match (each chunk
    // after its own upload); on the CPU each chunk's result is copied out of its tensor.
    // A pinned input's chunks of at most 4 MiB are uploaded by queued DMAs that read it
    // after the call: it is kept to the end (and the device synchronised on an error).
    let in_place = on_device && img.sample_type() == out_type;
    let input = img.data;
    let mut out = if in_place {
        None
    } else {
        Some(alloc.host(out_type, a * plane)?)
    };
    let mut pending: Option<(usize, Tensor)> = None;
    let mut input = Some(input);
    let result = (|| -> anyhow::Result<()> {
        for i in 0..=calls {
            let next = if i < calls {
                let n = per.min(a - i * per);
                let s = streams[i % streams.len().max(1)];
                let src = input
                    .as_ref()
                    .ok_or_else(|| anyhow::anyhow!("internal: input gone"))?;
                let t = rt.with_stream(&s, || -> anyhow::Result<Tensor> {
                    let r = i * per * plane..(i * per + n) * plane;
                    let t = with_host!(src, |buf| rt.tensor(&buf[r], &[n, b, c])?);
                    filter_tensor(&t, f, false, out_type)
                })??;
                Some((i, t))
            } else {
                None
            };
            if let Some((j, t)) = pending.take() {
                let r = j * per * plane..j * per * plane + t.len();
                let dst = match out.as_mut() {
                    Some(o) => o,
                    None => input
                        .as_mut()
                        .ok_or_else(|| anyhow::anyhow!("internal: input gone"))?,
                };
                with_host!(dst, |buf| t.to_host_into(&mut buf[r])?);
                if let Some(pb) = &bar {
                    pb.inc(1);
                }
            }
            pending = next;
        }
        Ok(())
    })();
    if result.is_err() {
        // queued uploads may still read the input (module docs of filter_host)
        let _ = rt.synchronize();
        if let Some(pb) = &bar {
            pb.abandon();
        }
    } else if let Some(pb) = bar {
        pb.finish_and_clear();
    }
    result?;
    match (out, input) {
        (Some(o), _) => Ok(OutData::Host(o)),
        (None, Some(i)) => Ok(OutData::Host(i)),
        (None, None) => anyhow::bail!("internal: no output"),
    }
}

/// Writes the result: `.npy` float32 in the input's shape, PNG/TIFF in the output type.
pub(crate) fn write_image2(
    path: &Path,
    format: Format,
    shape: &[usize],
    dims: [usize; 3],
    out: &OutData,
) -> anyhow::Result<()> {
    let samples = out.samples()?;
    if format == Format::Npy {
        let kiln_io::SamplesRef::F32(v) = samples else {
            anyhow::bail!("internal: an .npy output of {}", out.sample_type()?.name());
        };
        let view = ndarray::ArrayViewD::from_shape(ndarray::IxDyn(shape), v)?;
        return Ok(kiln_io::write_npy(path, &view).map_err(io_error("--output"))?);
    }
    let [h, w, c] = dims;
    kiln_io::write_image_samples(path, h, w, c, samples).map_err(io_error("--output"))?;
    Ok(())
}
