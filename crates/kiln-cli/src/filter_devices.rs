//! `kiln filter2d --devices` and `kiln filter3d --devices`: the items of one input file
//! split over several devices by kiln's executor (shares from calibrated throughput, work
//! stealing, chunks merged in order).
//!
//! What is split (the honest, simple option):
//! - filter2d: the images of a `--batch` stack `(N, H, W)`; chunks are runs of images.
//! - filter3d: the volumes of a 4-D input `[i, j, k, t]` along `t`; chunks are runs of
//!   volumes (gathered into contiguous `(t, i, j, k)` and scattered back).
//! - One image or one 3-D volume has nothing to split: it runs the one-file path on the
//!   set's first device (`devices_arg::first_request`), and `--json` says so.
//! - A directory or glob batch is refused with `--devices` (it streams files through one
//!   device's pipeline; run it with `--device`).
//!
//! Each chunk runs the op the one-device path runs on the same item (`Tensor::filter2d` on
//! `(n, h, w)` planes, `Tensor::filter3d` per volume, or the ndimage op), on an f32 copy of
//! the input (an 8/16-bit stack is converted on the host, exactly, where the one-device path
//! converts on the device, exactly), so the output has the bits of a one-device run on that
//! kind of device.

use crate::devices_arg::{self, check_exclusive, first_request, per_chunk, split_of, whole_on};
use crate::filter_batch::is_batch_input;
use crate::filter_cmd::{
    finish, image_summary, invalid, io_error, path_name, preflight, refuse_batch_flags, volume_summary,
    Args2d, Args3d, Common, Layout2, Summary, Timings,
};
use crate::filter_host::{Alloc, HostBuf, HostData, OutData};
use crate::filter_image::{open_image2, output_type_2d, read_image2, write_image2};
use crate::filter_kernel::{
    kernel_2d_any, kernel_3d_any, linear_op, plan_size, AnyKernel, Described, Filter2, Filter3,
};
use crate::filter_volume::{read_volume3, volume_input_type};
use kiln::executor::{DeviceSet, Worker, Workload};
use kiln::imaging::FilterPath;
use kiln::{Config, DeviceRequest};
use kiln_io::Format;
use ndarray::Axis;
use std::ops::Range;
use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

fn refuse_file_batch(input: &Path) -> anyhow::Result<()> {
    if is_batch_input(input) {
        return Err(invalid(
            "--devices",
            format!(
                "{} is a batch of files; --devices splits the images of one --batch .npy stack \
                 (filter2d) or the volumes of one 4-D file (filter3d). Run a directory or glob \
                 on one device with --device",
                input.display()
            ),
        ));
    }
    Ok(())
}

fn range(i: usize, per: usize, total: usize) -> Range<usize> {
    let a = (i * per).min(total);
    a..(a + per).min(total)
}

/// A stack `(n, h, w)` of f32 images under a [`Filter2`]; chunks are runs of `per` images.
struct Images<'a> {
    data: &'a [f32],
    dims: [usize; 3],
    filter: Filter2<'a>,
    taps: f64,
    key: String,
    per: usize,
}

impl Workload for Images<'_> {
    type Part = Vec<f32>;
    type Output = Vec<f32>;

    fn key(&self) -> String {
        self.key.clone()
    }

    fn chunks(&self) -> usize {
        self.dims[0].div_ceil(self.per)
    }

    fn units(&self, i: usize) -> f64 {
        let [n, h, w] = self.dims;
        (range(i, self.per, n).len() * h * w) as f64 * self.taps
    }

    fn run(&self, worker: &Worker, i: usize) -> kiln::Result<Vec<f32>> {
        let [n, h, w] = self.dims;
        let r = range(i, self.per, n);
        let src = &self.data[r.start * h * w..r.end * h * w];
        worker.run(|rt| {
            let t = rt.tensor(src, &[r.len(), h, w])?;
            let y = match self.filter {
                Filter2::Kernel(k, mode) => t.filter2d(k, mode, FilterPath::Auto)?,
                Filter2::Op(op) => op(&t)?,
            };
            y.to_vec::<f32>()
        })
    }

    fn merge(&self, parts: Vec<Vec<f32>>) -> kiln::Result<Vec<f32>> {
        Ok(parts.concat())
    }
}

/// `t` volumes `(d, h, w)`, contiguous, under a [`Filter3`]; chunks are runs of `per`.
struct Volumes<'a> {
    data: &'a [f32],
    dims: [usize; 3],
    count: usize,
    filter: Filter3<'a>,
    taps: f64,
    key: String,
    per: usize,
}

impl Workload for Volumes<'_> {
    type Part = Vec<f32>;
    type Output = Vec<f32>;

    fn key(&self) -> String {
        self.key.clone()
    }

    fn chunks(&self) -> usize {
        self.count.div_ceil(self.per)
    }

    fn units(&self, i: usize) -> f64 {
        let vox: usize = self.dims.iter().product();
        (range(i, self.per, self.count).len() * vox) as f64 * self.taps
    }

    fn run(&self, worker: &Worker, i: usize) -> kiln::Result<Vec<f32>> {
        let vox: usize = self.dims.iter().product();
        let r = range(i, self.per, self.count);
        worker.run(|rt| {
            let mut out = Vec::with_capacity(r.len() * vox);
            for z in r.clone() {
                let t = rt.tensor(&self.data[z * vox..(z + 1) * vox], &self.dims)?;
                let y = match self.filter {
                    Filter3::Kernel(k, mode) => t.filter3d(k, mode, FilterPath::Auto)?,
                    Filter3::Op(op) => op(&t)?,
                };
                out.extend(y.to_vec::<f32>()?);
            }
            Ok(out)
        })
    }

    fn merge(&self, parts: Vec<Vec<f32>>) -> kiln::Result<Vec<f32>> {
        Ok(parts.concat())
    }
}

fn describe(
    command: &'static str,
    mode: kiln::core::imaging::BoundaryMode,
) -> impl Fn(String, usize, &'static str) -> Described {
    move |name, size, path| Described {
        command,
        name,
        size,
        mode,
        path,
    }
}

/// `kiln filter2d --devices`; see the module docs.
pub(crate) fn run_2d(
    args: &Args2d,
    set: &DeviceSet,
    request: DeviceRequest,
    cfg: &Config,
) -> anyhow::Result<ExitCode> {
    let c = &args.common;
    check_exclusive(Some(set), request)?;
    refuse_file_batch(&c.input)?;
    refuse_batch_flags(c)?;
    let t_start = Instant::now();
    let (fin, fout, mode) = preflight(c, true)?;
    let d = describe("filter2d", mode);
    match kernel_2d_any(&c.kernel, mode)? {
        AnyKernel::Classic(k) => {
            let path = path_name(kiln::imaging::path_2d(&k, mode, FilterPath::Auto)?);
            let desc = d(k.name().into(), k.size(), path);
            images(
                args,
                (fin, fout),
                Filter2::Kernel(&k, mode),
                &desc,
                t_start,
                set,
                cfg,
            )
        }
        AnyKernel::Linear(f) => {
            let op = linear_op(&f);
            let desc = d(f.name.clone(), plan_size(&f), "ndimage");
            images(args, (fin, fout), Filter2::Op(&op), &desc, t_start, set, cfg)
        }
    }
}

fn key(desc: &Described) -> String {
    format!(
        "cli-{}/{}/k{}/{}/{}",
        desc.command,
        desc.name,
        desc.size,
        desc.mode.name(),
        desc.path
    )
}

fn images(
    args: &Args2d,
    (fin, fout): (Format, Format),
    filter: Filter2,
    desc: &Described,
    t_start: Instant,
    set: &DeviceSet,
    cfg: &Config,
) -> anyhow::Result<ExitCode> {
    let c = &args.common;
    let header = open_image2(&c.input, fin, args.batch)?;
    if header.layout() != Layout2::Batch {
        drop(header);
        let req = first_request(set);
        let s = image_summary(c, args.batch, (fin, fout), filter, desc, t_start, req, cfg)?;
        return finish(one_item(s, set, "one image"), c.json);
    }
    let t = Instant::now();
    let img = read_image2(header, &Alloc::pageable())?;
    let (shape, dims, in_type) = (img.shape.clone(), img.dims, img.sample_type());
    let out_type = output_type_2d(&c.output, fout, dims, Layout2::Batch, in_type)?;
    let data: Vec<f32> = match img.data.samples() {
        kiln_io::SamplesRef::U8(v) => v.iter().map(|&x| f32::from(x)).collect(),
        kiln_io::SamplesRef::U16(v) => v.iter().map(|&x| f32::from(x)).collect(),
        kiln_io::SamplesRef::F32(v) => v.to_vec(),
    };
    drop(img);
    let mut tm = Timings {
        read_s: t.elapsed().as_secs_f64(),
        ..Timings::default()
    };
    let t = Instant::now();
    let (ex, label) = devices_arg::open(set, cfg)?;
    tm.runtime_s = t.elapsed().as_secs_f64();
    let work = Images {
        data: &data,
        dims,
        filter,
        taps: (desc.size * desc.size) as f64,
        key: key(desc),
        per: per_chunk(dims[0], ex.workers().len()),
    };
    let t = Instant::now();
    let (out, rep) = ex.run(&work)?;
    tm.filter_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let samples = out.len();
    write_image2(
        &c.output,
        fout,
        &shape,
        dims,
        &OutData::Host(HostData::F32(HostBuf::Vec(out))),
    )?;
    tm.write_s = t.elapsed().as_secs_f64();
    let s = Summary {
        command: desc.command,
        input: c.input.display().to_string(),
        input_shape: shape,
        layout: Layout2::Batch.name(),
        input_type: in_type.name().into(),
        kernel: desc.name.clone(),
        kernel_size: desc.size,
        mode: desc.mode.name(),
        cval: desc.mode.cval(),
        path: desc.path,
        items: dims[0],
        device: label,
        fallback_reason: None,
        output: c.output.display().to_string(),
        output_type: out_type.name(),
        seconds: tm.filter_s,
        samples_per_s: samples as f64 / tm.filter_s.max(1e-9),
        total_seconds: t_start.elapsed().as_secs_f64(),
        timings: tm,
        workers: Some(split_of(&rep)),
        devices_note: Some(format!(
            "{} images split into {} chunks over --devices {set}",
            dims[0], rep.chunks
        )),
    };
    finish(s, c.json)
}

/// The summary of a one-item run under `--devices`: all of it on the first device.
fn one_item(mut s: Summary, set: &DeviceSet, what: &str) -> Summary {
    s.workers = Some(whole_on(&s.device, s.seconds));
    s.devices_note = Some(format!(
        "{what}: nothing to split; it ran on the first device of --devices {set}"
    ));
    s
}

/// `kiln filter3d --devices`; see the module docs.
pub(crate) fn run_3d(
    args: &Args3d,
    set: &DeviceSet,
    request: DeviceRequest,
    cfg: &Config,
) -> anyhow::Result<ExitCode> {
    let c = &args.common;
    check_exclusive(Some(set), request)?;
    refuse_file_batch(&c.input)?;
    refuse_batch_flags(c)?;
    let t_start = Instant::now();
    let (fin, _fout, mode) = preflight(c, false)?;
    let d = describe("filter3d", mode);
    match kernel_3d_any(&c.kernel, mode)? {
        AnyKernel::Classic(k) => {
            let path = path_name(kiln::imaging::path_3d(&k, mode, FilterPath::Auto)?);
            let desc = d(k.name().into(), k.size(), path);
            volumes(c, fin, Filter3::Kernel(&k, mode), &desc, t_start, set, cfg)
        }
        AnyKernel::Linear(f) => {
            let op = linear_op(&f);
            let desc = d(f.name.clone(), plan_size(&f), "ndimage");
            volumes(c, fin, Filter3::Op(&op), &desc, t_start, set, cfg)
        }
    }
}

fn volumes(
    c: &Common,
    fin: Format,
    filter: Filter3,
    desc: &Described,
    t_start: Instant,
    set: &DeviceSet,
    cfg: &Config,
) -> anyhow::Result<ExitCode> {
    let t = Instant::now();
    let mut vol = read_volume3(&c.input)?;
    let s = vol.data.shape().to_vec();
    if s.len() != 4 {
        drop(vol);
        let req = first_request(set);
        let sum = volume_summary(c, fin, filter, desc, t_start, req, cfg)?;
        return finish(one_item(sum, set, "one 3-D volume"), c.json);
    }
    let (dims, count) = ([s[0], s[1], s[2]], s[3]);
    let vox: usize = dims.iter().product();
    let mut data = Vec::with_capacity(vox * count);
    for z in 0..count {
        data.extend(vol.data.index_axis(Axis(3), z).iter().copied());
    }
    let mut tm = Timings {
        read_s: t.elapsed().as_secs_f64(),
        ..Timings::default()
    };
    let input_type = volume_input_type(fin, &vol);
    let t = Instant::now();
    let (ex, label) = devices_arg::open(set, cfg)?;
    tm.runtime_s = t.elapsed().as_secs_f64();
    let work = Volumes {
        data: &data,
        dims,
        count,
        filter,
        taps: (desc.size * desc.size * desc.size) as f64,
        key: key(desc),
        per: per_chunk(count, ex.workers().len()),
    };
    let t = Instant::now();
    let (out, rep) = ex.run(&work)?;
    tm.filter_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    for z in 0..count {
        let view = ndarray::ArrayView3::from_shape(dims, &out[z * vox..(z + 1) * vox])?;
        vol.data.index_axis_mut(Axis(3), z).assign(&view);
    }
    kiln_io::write_volume(&c.output, &vol).map_err(io_error("--output"))?;
    tm.write_s = t.elapsed().as_secs_f64();
    let sum = Summary {
        command: desc.command,
        input: c.input.display().to_string(),
        input_shape: s,
        layout: "volumes",
        input_type,
        kernel: desc.name.clone(),
        kernel_size: desc.size,
        mode: desc.mode.name(),
        cval: desc.mode.cval(),
        path: desc.path,
        items: count,
        device: label,
        fallback_reason: None,
        output: c.output.display().to_string(),
        output_type: "f32",
        seconds: tm.filter_s,
        samples_per_s: (vox * count) as f64 / tm.filter_s.max(1e-9),
        total_seconds: t_start.elapsed().as_secs_f64(),
        timings: tm,
        workers: Some(split_of(&rep)),
        devices_note: Some(format!(
            "{count} volumes (along t) split into {} chunks over --devices {set}",
            rep.chunks
        )),
    };
    finish(sum, c.json)
}
