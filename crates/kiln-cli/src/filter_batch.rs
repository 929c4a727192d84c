//! Batch mode of `kiln filter2d` / `kiln filter3d`: `--input` a directory (every file of a
//! supported format in it) or a glob, `--output` a directory (created if missing); each
//! output keeps its input's file name and format. The files stream through one process
//! (`filter_pipeline.rs`): one runtime, one context, the kernels compiled or loaded once.
//!
//! Decisions:
//! - Everything that does not depend on a file is checked first, exit 4 and nothing
//!   written: the kernel, the mode, the flags, the output directory, no input matching, two
//!   inputs of the same name (from different directories of a glob), an input that its
//!   output would replace.
//! - A file that fails (unreadable, corrupt, a format that cannot hold the result, a device
//!   error) is listed at the end with its stage and reason and the rest go on; with
//!   `--fail-fast` the first failure stops the batch (files in flight are dropped, outputs
//!   already written stay). A sticky CUDA error stops it too: nothing more can run.
//! - Exit code: 0 if every file succeeded, else the code of the first failed file in
//!   input order (`exit.rs`: 4 for bad input, 7 for a CUDA error, ...). A runtime that
//!   cannot be created fails the whole batch as the one-file command would (exit 3).
//! - Outputs are written atomically (a temporary file in the output directory, renamed),
//!   so a failure never leaves a partial file.
//! - Names starting with `.` are passed over (in a glob, unless the pattern spells the dot),
//!   kiln's own temporary files among them; so are files of other extensions (listed under
//!   `skipped` in the JSON).

use crate::filter_cmd::{format_of, invalid, io_error, parse_mode, path_name, Args2d, Args3d, Common};
use crate::filter_host::{Alloc, RuntimeStart};
use crate::filter_image::{filter_image2, open_image2, output_type_2d, read_image2, write_image2, Image2};
use crate::filter_kernel::{
    kernel_2d_any, kernel_3d_any, linear_op, plan_size, AnyKernel, Described, Filter2, Filter3,
};
use crate::filter_pipeline::{self, Budget, Job, Outcome, Report, Settings, StageTime, Ticket};
use crate::filter_volume::{filter_volume3, read_volume3};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use kiln::core::imaging::BoundaryMode;
use kiln::imaging::FilterPath;
use kiln::{Config, DeviceRequest, Runtime, Stream};
use kiln_io::{Format, SampleType, Volume};
use serde::Serialize;
use std::collections::HashMap;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The most bytes of decoded inputs and results the pipeline holds at once (one file of
/// any size still goes through).
const BUDGET_BYTES: u64 = 2 << 30;

/// The utilisation from which the stderr report says a stage bounds the batch.
const SATURATED: f64 = 0.8;

/// Whether `--input` names a batch: a directory, or a pattern (`*`, `?`, `[`) that is not
/// itself an existing file.
pub(crate) fn is_batch_input(input: &Path) -> bool {
    if input.is_dir() {
        return true;
    }
    input.to_string_lossy().contains(['*', '?', '[']) && !input.is_file()
}

#[derive(Serialize)]
struct Skipped {
    path: String,
    reason: String,
}

/// The inputs of a batch, sorted, and what was passed over.
pub(crate) struct Listing {
    pub(crate) files: Vec<PathBuf>,
    skipped: Vec<Skipped>,
}

pub(crate) fn list_inputs(input: &Path, two_d: bool) -> anyhow::Result<Listing> {
    let mut files = Vec::new();
    let mut skipped = Vec::new();
    let mut consider = |p: PathBuf, skipped: &mut Vec<Skipped>| {
        if p.is_dir() {
            return;
        }
        match format_of("--input", &p, two_d) {
            Ok(_) => files.push(p),
            Err(_) => skipped.push(Skipped {
                path: p.display().to_string(),
                reason: "not a file type this command reads".into(),
            }),
        }
    };
    if input.is_dir() {
        let entries = std::fs::read_dir(input).map_err(|e| {
            invalid(
                "--input",
                format!("cannot list the directory {}: {e}", input.display()),
            )
        })?;
        for entry in entries {
            let entry = entry.map_err(|e| invalid("--input", format!("{}: {e}", input.display())))?;
            if entry.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            consider(entry.path(), &mut skipped);
        }
    } else {
        let pattern = input.to_string_lossy();
        // As a shell: `*` does not match a leading `.` (kiln's own temporary files).
        let opts = glob::MatchOptions {
            require_literal_leading_dot: true,
            ..glob::MatchOptions::new()
        };
        let paths = glob::glob_with(&pattern, opts)
            .map_err(|e| invalid("--input", format!("`{pattern}` is not a valid glob pattern: {e}")))?;
        for p in paths {
            match p {
                Ok(p) => consider(p, &mut skipped),
                Err(e) => skipped.push(Skipped {
                    path: e.path().display().to_string(),
                    reason: format!("cannot be read: {}", e.error()),
                }),
            }
        }
    }
    files.sort();
    if files.is_empty() {
        let exts = if two_d {
            kiln_io::IMAGE_EXTENSIONS
        } else {
            kiln_io::VOLUME_EXTENSIONS
        };
        return Err(invalid(
            "--input",
            format!(
                "{}: no {} files ({exts}) {}{}",
                input.display(),
                if two_d { "image" } else { "volume" },
                if input.is_dir() {
                    "in the directory"
                } else {
                    "match the pattern"
                },
                if skipped.is_empty() {
                    String::new()
                } else {
                    format!(" ({} others passed over)", skipped.len())
                }
            ),
        ));
    }
    Ok(Listing { files, skipped })
}

/// The output path of each input in `dir`, after the checks of the module docs; creates
/// the directory.
pub(crate) fn output_paths(dir: &Path, files: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
    if dir.exists() && !dir.is_dir() {
        return Err(invalid(
            "--output",
            format!("{} is a file; for a batch --output is a directory", dir.display()),
        ));
    }
    std::fs::create_dir_all(dir).map_err(|e| {
        invalid(
            "--output",
            format!("cannot create the directory {}: {e}", dir.display()),
        )
    })?;
    let out_dir =
        std::fs::canonicalize(dir).map_err(|e| invalid("--output", format!("{}: {e}", dir.display())))?;
    let mut seen: HashMap<std::ffi::OsString, &Path> = HashMap::new();
    let mut outs = Vec::with_capacity(files.len());
    for f in files {
        let name = f
            .file_name()
            .ok_or_else(|| invalid("--input", format!("{} has no file name", f.display())))?;
        if let Some(other) = seen.insert(name.to_owned(), f) {
            return Err(invalid(
                "--input",
                format!(
                    "{} and {} would both be written to {}; give inputs distinct names",
                    other.display(),
                    f.display(),
                    dir.join(name).display()
                ),
            ));
        }
        let parent = match f.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        if std::fs::canonicalize(parent).is_ok_and(|p| p == out_dir) {
            return Err(invalid(
                "--output",
                format!(
                    "{} holds the inputs ({} would replace itself); write to another directory",
                    dir.display(),
                    f.display()
                ),
            ));
        }
        outs.push(dir.join(name));
    }
    Ok(outs)
}

fn settings(c: &Common) -> Settings {
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    Settings {
        readers: c.readers.map_or(cores, |n| n as usize),
        writers: c.writers.map_or(cores, |n| n as usize),
        streams: c.streams.map_or(2, |n| n as usize),
        fail_fast: c.fail_fast,
        budget_bytes: BUDGET_BYTES,
    }
}

fn bar(n: usize, hidden: bool) -> ProgressBar {
    if hidden || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::with_draw_target(Some(n as u64), ProgressDrawTarget::stderr());
    let style = ProgressStyle::with_template("[{bar:40}] {pos}/{len} files{msg} {per_sec} (eta {eta})")
        .unwrap_or_else(|_| ProgressStyle::default_bar());
    pb.set_style(style);
    pb
}

// ---- the 2-D job ------------------------------------------------------------------------

struct Job2<'a> {
    filter: Filter2<'a>,
    batch: bool,
}

struct Read2 {
    img: Image2,
    out_type: SampleType,
    format: Format,
}

struct Done2 {
    out: crate::filter_host::OutData,
    shape: Vec<usize>,
    dims: [usize; 3],
    items: usize,
    format: Format,
}

fn format_in(path: &Path, two_d: bool) -> anyhow::Result<Format> {
    format_of("--input", path, two_d)
}

impl Job for Job2<'_> {
    type In = Read2;
    type Out = Done2;

    fn read<'b>(
        &self,
        path: &Path,
        out: &Path,
        alloc: &Alloc,
        budget: &'b Budget,
    ) -> anyhow::Result<(Read2, Ticket<'b>)> {
        let format = format_in(path, true)?;
        let h = open_image2(path, format, self.batch)?;
        let out_type = output_type_2d(out, format, h.dims(), h.layout(), h.sample_type())?;
        let bytes = h.len() as u64 * (bytes_of(h.sample_type()) + bytes_of(out_type));
        let ticket = budget.acquire(bytes)?;
        let img = read_image2(h, alloc)?;
        Ok((
            Read2 {
                img,
                out_type,
                format,
            },
            ticket,
        ))
    }

    fn filter(&self, rt: &Runtime, r: Read2, alloc: &Alloc<'_>, stream: Stream) -> anyhow::Result<Done2> {
        let (shape, dims, items) = (r.img.shape.clone(), r.img.dims, r.img.items());
        let out = filter_image2(rt, r.img, &self.filter, r.out_type, &[stream], alloc, false, None)?;
        Ok(Done2 {
            out,
            shape,
            dims,
            items,
            format: r.format,
        })
    }

    fn write(&self, d: Done2, path: &Path) -> anyhow::Result<usize> {
        write_image2(path, d.format, &d.shape, d.dims, &d.out)?;
        Ok(d.items)
    }
}

fn bytes_of(st: SampleType) -> u64 {
    match st {
        SampleType::U8 => 1,
        SampleType::U16 => 2,
        SampleType::F32 => 4,
    }
}

// ---- the 3-D job ------------------------------------------------------------------------

struct Job3<'a> {
    filter: Filter3<'a>,
}

impl Job for Job3<'_> {
    type In = Volume;
    type Out = (Volume, usize);

    fn read<'b>(
        &self,
        path: &Path,
        _out: &Path,
        _alloc: &Alloc,
        budget: &'b Budget,
    ) -> anyhow::Result<(Volume, Ticket<'b>)> {
        format_in(path, false)?;
        let vol = read_volume3(path)?;
        let ticket = budget.acquire(vol.data.len() as u64 * 8)?;
        Ok((vol, ticket))
    }

    fn filter(
        &self,
        rt: &Runtime,
        vol: Volume,
        _alloc: &Alloc,
        _stream: Stream,
    ) -> anyhow::Result<(Volume, usize)> {
        filter_volume3(rt, vol, &self.filter, false)
    }

    fn write(&self, (vol, items): (Volume, usize), path: &Path) -> anyhow::Result<usize> {
        kiln_io::write_volume(path, &vol).map_err(io_error("--output"))?;
        Ok(items)
    }
}

// ---- the commands -----------------------------------------------------------------------

#[derive(Serialize)]
struct FileError {
    input: String,
    output: String,
    stage: &'static str,
    exit_code: u8,
    error: String,
}

#[derive(Serialize)]
struct Stages {
    read: StageTime,
    device: StageTime,
    write: StageTime,
}

#[derive(Serialize)]
struct BatchSummary {
    command: &'static str,
    batch: bool,
    input: String,
    output: String,
    kernel: String,
    kernel_size: usize,
    mode: &'static str,
    cval: Option<f64>,
    path: &'static str,
    device: String,
    fallback_reason: Option<String>,
    files: usize,
    ok: usize,
    failed: usize,
    /// Files neither written nor failed: the batch stopped first (--fail-fast, a sticky
    /// device error).
    not_processed: usize,
    /// Images (or volumes) written: a `--batch` `.npy` holds several, a 4-D volume several.
    items: usize,
    seconds: f64,
    /// Seconds until the runtime was up (creating the CUDA context), within `seconds`: the
    /// readers decode meanwhile, the device stage waits.
    runtime_s: f64,
    files_per_s: f64,
    frames_per_s: f64,
    readers: usize,
    writers: usize,
    streams: usize,
    stages: Stages,
    /// The stage with the highest utilisation: `read` (decoding), `device` or `write`
    /// (encoding). Below [`SATURATED`] no stage was saturated (a short batch is bound by
    /// its start, the runtime's creation among it).
    bound_by: &'static str,
    errors: Vec<FileError>,
    skipped: Vec<Skipped>,
}

/// What both commands share: the listing, the checks, the run and the report.
struct Batch<'a> {
    common: &'a Common,
    desc: &'a Described,
}

impl Batch<'_> {
    fn run<J: Job>(
        &self,
        job: &J,
        listing: Listing,
        outputs: Vec<PathBuf>,
        start: RuntimeStart,
    ) -> anyhow::Result<ExitCode> {
        let c = self.common;
        let set = settings(c);
        let pb = bar(listing.files.len(), c.json);
        let report = filter_pipeline::run(job, &listing.files, &outputs, &set, start, &pb);
        pb.finish_and_clear();
        let report = report?;
        self.finish(report, &listing, &outputs, &set)
    }

    fn finish(
        &self,
        r: Report,
        listing: &Listing,
        outputs: &[PathBuf],
        set: &Settings,
    ) -> anyhow::Result<ExitCode> {
        let c = self.common;
        let mut errors = Vec::new();
        let (mut ok, mut items, mut first_code) = (0, 0, None);
        for (i, o) in r.outcomes.iter().enumerate() {
            match o {
                Some(Outcome::Ok(n)) => {
                    ok += 1;
                    items += n;
                }
                Some(Outcome::Failed { stage, code, error }) => {
                    first_code.get_or_insert(*code);
                    errors.push(FileError {
                        input: listing.files[i].display().to_string(),
                        output: outputs[i].display().to_string(),
                        stage,
                        exit_code: *code,
                        error: error.clone(),
                    });
                }
                None => {}
            }
        }
        let files = listing.files.len();
        let not_processed = files - ok - errors.len();
        let stages = [("read", r.read), ("device", r.device), ("write", r.write)];
        let bound_by = stages
            .iter()
            .max_by(|a, b| a.1.utilisation.total_cmp(&b.1.utilisation))
            .map_or("read", |s| s.0);
        let s = BatchSummary {
            command: self.desc.command,
            batch: true,
            input: c.input.display().to_string(),
            output: c.output.display().to_string(),
            kernel: self.desc.name.clone(),
            kernel_size: self.desc.size,
            mode: self.desc.mode.name(),
            cval: self.desc.mode.cval(),
            path: self.desc.path,
            device: r.runtime.device_name(),
            fallback_reason: r.runtime.fallback_reason().map(str::to_string),
            files,
            ok,
            failed: errors.len(),
            not_processed,
            items,
            seconds: r.seconds,
            runtime_s: r.runtime_s,
            files_per_s: ok as f64 / r.seconds.max(1e-9),
            frames_per_s: items as f64 / r.seconds.max(1e-9),
            readers: set.readers,
            writers: set.writers,
            streams: set.streams,
            stages: Stages {
                read: r.read,
                device: r.device,
                write: r.write,
            },
            bound_by,
            errors,
            skipped: Vec::new(),
        };
        for e in &s.errors {
            eprintln!("error: {} ({}): {}", e.input, e.stage, e.error);
        }
        let pct = |t: StageTime| format!("{:.1} s busy, {:.0}%", t.busy_s, 100.0 * t.utilisation);
        eprintln!(
            "{} batch on {}: {} of {} files ok{}{} in {:.2} s ({:.1} files/s, {:.1} frames/s); \
             read/decode {} of {} threads, device {} of {} streams, encode/write {} of {} threads: \
             {}",
            s.command,
            s.device,
            ok,
            files,
            if s.failed > 0 {
                format!(", {} failed", s.failed)
            } else {
                String::new()
            },
            if not_processed > 0 {
                format!(", {not_processed} not processed (stopped)")
            } else {
                String::new()
            },
            s.seconds,
            s.files_per_s,
            s.frames_per_s,
            pct(r.read),
            set.readers,
            pct(r.device),
            set.streams,
            pct(r.write),
            set.writers,
            {
                let (name, u) = stages
                    .iter()
                    .find(|s| s.0 == bound_by)
                    .map_or(("read", 0.0), |s| (s.0, s.1.utilisation));
                let name = match name {
                    "read" => "read (decode)",
                    "write" => "write (encode)",
                    _ => "device",
                };
                if u >= SATURATED {
                    format!("bound by {name}")
                } else {
                    format!(
                        "no stage saturated (busiest: {name}; the runtime was up after {:.2} s)",
                        r.runtime_s
                    )
                }
            }
        );
        if c.json {
            let s = BatchSummary {
                skipped: listing
                    .skipped
                    .iter()
                    .map(|k| Skipped {
                        path: k.path.clone(),
                        reason: k.reason.clone(),
                    })
                    .collect(),
                ..s
            };
            println!("{}", serde_json::to_string_pretty(&s)?);
        }
        Ok(ExitCode::from(match (first_code, not_processed) {
            (Some(code), _) => code,
            (None, 0) => crate::exit::OK,
            (None, _) => crate::exit::INTERNAL,
        }))
    }
}

/// The checks of the module docs; the listing and the output paths.
fn prepare(c: &Common, two_d: bool) -> anyhow::Result<(Listing, Vec<PathBuf>, BoundaryMode)> {
    let mode = parse_mode(&c.mode, c.cval)?;
    let listing = list_inputs(&c.input, two_d)?;
    let outputs = output_paths(&c.output, &listing.files)?;
    Ok((listing, outputs, mode))
}

/// `kiln filter2d` over a directory or a glob.
pub(crate) fn run_2d(args: &Args2d, request: DeviceRequest, cfg: &Config) -> anyhow::Result<ExitCode> {
    let c = &args.common;
    let mode = parse_mode(&c.mode, c.cval)?;
    let d = |name: String, size: usize, path: &'static str| Described {
        command: "filter2d",
        name,
        size,
        mode,
        path,
    };
    match kernel_2d_any(&c.kernel, mode)? {
        AnyKernel::Classic(k) => {
            let path = path_name(kiln::imaging::path_2d(&k, mode, FilterPath::Auto)?);
            run_images(
                c,
                args.batch,
                Filter2::Kernel(&k, mode),
                &d(k.name().into(), k.size(), path),
                request,
                cfg,
            )
        }
        AnyKernel::Linear(f) => {
            let op = linear_op(&f);
            run_images(
                c,
                args.batch,
                Filter2::Op(&op),
                &d(f.name.clone(), plan_size(&f), "ndimage"),
                request,
                cfg,
            )
        }
    }
}

/// A batch of images through `filter`.
pub(crate) fn run_images(
    c: &Common,
    batch: bool,
    filter: Filter2,
    desc: &Described,
    request: DeviceRequest,
    cfg: &Config,
) -> anyhow::Result<ExitCode> {
    let (listing, outputs, _) = prepare(c, true)?;
    let start = RuntimeStart::spawn(request, cfg);
    let job = Job2 { filter, batch };
    Batch { common: c, desc }.run(&job, listing, outputs, start)
}

/// `kiln filter3d` over a directory or a glob.
pub(crate) fn run_3d(args: &Args3d, request: DeviceRequest, cfg: &Config) -> anyhow::Result<ExitCode> {
    let c = &args.common;
    let mode = parse_mode(&c.mode, c.cval)?;
    let d = |name: String, size: usize, path: &'static str| Described {
        command: "filter3d",
        name,
        size,
        mode,
        path,
    };
    match kernel_3d_any(&c.kernel, mode)? {
        AnyKernel::Classic(k) => {
            let path = path_name(kiln::imaging::path_3d(&k, mode, FilterPath::Auto)?);
            run_volumes(
                c,
                Filter3::Kernel(&k, mode),
                &d(k.name().into(), k.size(), path),
                request,
                cfg,
            )
        }
        AnyKernel::Linear(f) => {
            let op = linear_op(&f);
            run_volumes(
                c,
                Filter3::Op(&op),
                &d(f.name.clone(), plan_size(&f), "ndimage"),
                request,
                cfg,
            )
        }
    }
}

/// A batch of volumes through `filter`.
pub(crate) fn run_volumes(
    c: &Common,
    filter: Filter3,
    desc: &Described,
    request: DeviceRequest,
    cfg: &Config,
) -> anyhow::Result<ExitCode> {
    let (listing, outputs, _) = prepare(c, false)?;
    let start = RuntimeStart::spawn(request, cfg);
    Batch { common: c, desc }.run(&Job3 { filter }, listing, outputs, start)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_inputs_are_directories_and_patterns() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("a[1].png"), b"x").unwrap();
        assert!(is_batch_input(d.path()));
        assert!(is_batch_input(&d.path().join("*.png")));
        assert!(is_batch_input(&d.path().join("f?.png")));
        // an existing file whose name has pattern characters is one file
        assert!(!is_batch_input(&d.path().join("a[1].png")));
        assert!(!is_batch_input(&d.path().join("missing.png")));
    }
}
