//! `kiln kernel check|run`: a safety review of a user's CUDA kernel before it runs in
//! production. `check` compiles the file with NVRTC for each target and reports what each
//! kernel costs the SM (registers, shared and local memory, spills) and the occupancy at a
//! block size, without a GPU; with `--sanitize LAUNCH.json` it also runs the kernel once
//! under compute-sanitizer's memcheck and racecheck. `run` is that one launch.

use crate::exit;
use kiln::core::backend::{bf16, f16};
use kiln::kernels::resources::{occupancy, sm_limits, KernelResources};
use kiln::kernels::{KernelArg, Scalar, ScalarType, UserSource};
use kiln::memory::UnpooledBuffer;
use kiln::{Config, DeviceRequest, Error, Runtime};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// `kiln kernel` options.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    action: Action,
}

#[derive(clap::Subcommand, Debug)]
enum Action {
    /// Compile FILE.cu for each --arch and print each kernel's registers, shared memory,
    /// local memory (stack frame), spills and occupancy at --block threads.
    ///
    /// Needs only libnvrtc, no GPU. A kernel that does not compile prints NVRTC's log with
    /// line numbers (exit 4). Spills or occupancy under 25% are flagged. With --sanitize
    /// LAUNCH.json the kernel also runs once on the GPU under compute-sanitizer's memcheck
    /// and racecheck (exit 5 when either reports an error; exit 3 with how to get the tool
    /// when it is missing). LAUNCH.json describes the launch:
    ///
    /// {"name": "saxpy", "grid": [4], "block": [128], "shared_mem": 0,
    ///  "args": [{"scalar": "float32", "value": 2.0},
    ///           {"array": "float32", "len": 512, "fill": "random"},
    ///           {"array": "float32", "len": 512, "fill": "zeros"},
    ///           {"scalar": "int32", "value": 512}]}
    ///
    /// (fill: zeros, ones, arange or random.) Example:
    /// kiln kernel check saxpy.cu --arch sm_80,sm_90 --block 256 --sanitize launch.json
    Check {
        /// The CUDA C++ source.
        file: PathBuf,
        /// Report only this kernel (default: every `extern "C"` kernel of the file).
        #[arg(long)]
        name: Option<String>,
        /// Targets, comma-separated (default: the GPU's, else sm_80,sm_90).
        #[arg(long, value_delimiter = ',', value_name = "sm_XX")]
        arch: Vec<String>,
        /// Threads per block for the occupancy.
        #[arg(long, default_value_t = 256)]
        block: u32,
        /// Dynamic shared memory per block, bytes, for the occupancy.
        #[arg(long, default_value_t = 0)]
        shared: u32,
        /// An NVRTC option for the compile (repeat for several), e.g. -O -DN=4.
        #[arg(long = "option", short = 'O', allow_hyphen_values = true)]
        options: Vec<String>,
        /// Run the launch LAUNCH.json describes under compute-sanitizer (memcheck, racecheck).
        #[arg(long, value_name = "LAUNCH.json")]
        sanitize: Option<PathBuf>,
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Launch a kernel of FILE.cu once as LAUNCH.json describes (on the selected GPU) and
    /// wait for it: what `check --sanitize` runs under compute-sanitizer.
    Run {
        /// The CUDA C++ source.
        file: PathBuf,
        /// The launch description (see `kiln kernel check --help`).
        #[arg(long, value_name = "LAUNCH.json")]
        launch: PathBuf,
        /// An NVRTC option (repeat for several).
        #[arg(long = "option", short = 'O', allow_hyphen_values = true)]
        options: Vec<String>,
    },
}

/// One launch: what `--sanitize` and `kernel run` read.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Launch {
    name: String,
    grid: Vec<u32>,
    block: Vec<u32>,
    #[serde(default)]
    shared_mem: u32,
    args: Vec<LaunchArg>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum LaunchArg {
    Array {
        array: String,
        len: usize,
        #[serde(default = "zeros")]
        fill: String,
    },
    Scalar {
        scalar: String,
        value: f64,
    },
}

fn zeros() -> String {
    "zeros".into()
}

#[derive(Serialize)]
struct Report {
    file: PathBuf,
    block: u32,
    dynamic_shared: u32,
    targets: BTreeMap<String, BTreeMap<String, KernelReport>>,
    sanitizer: Option<BTreeMap<String, String>>,
}

#[derive(Serialize)]
struct KernelReport {
    #[serde(flatten)]
    resources: KernelResources,
    occupancy: Option<f64>,
    blocks_per_sm: Option<u32>,
    limited_by: Option<&'static str>,
    warnings: Vec<String>,
}

/// Run a kernel action.
pub fn run(args: &Args, request: DeviceRequest, cfg: &Config) -> anyhow::Result<ExitCode> {
    match &args.action {
        Action::Check {
            file,
            name,
            arch,
            block,
            shared,
            options,
            sanitize,
            json,
        } => check(
            file,
            name.as_deref(),
            arch,
            *block,
            *shared,
            options,
            sanitize.as_deref(),
            *json,
            request,
            cfg,
        ),
        Action::Run {
            file,
            launch,
            options,
        } => {
            run_once(file, launch, options, request, cfg)?;
            println!("kernel ran and finished");
            Ok(ExitCode::from(exit::OK))
        }
    }
}

fn read(file: &Path) -> anyhow::Result<String> {
    std::fs::read_to_string(file).map_err(|e| {
        Error::Io {
            path: file.to_path_buf(),
            source: e,
        }
        .into()
    })
}

#[allow(clippy::too_many_arguments)]
fn check(
    file: &Path,
    name: Option<&str>,
    arch: &[String],
    block: u32,
    shared: u32,
    options: &[String],
    sanitize: Option<&Path>,
    json: bool,
    request: DeviceRequest,
    cfg: &Config,
) -> anyhow::Result<ExitCode> {
    // With a driver present NVRTC goes through the driver's compute cache, and a cubin it
    // finds there comes without ptxas's report: the check runs with the cache off (in a
    // child process, since the variable is read when the driver loads).
    if std::env::var_os("CUDA_CACHE_DISABLE").is_none_or(|v| v != "1") {
        let status = std::process::Command::new(std::env::current_exe()?)
            .args(std::env::args_os().skip(1))
            .env("CUDA_CACHE_DISABLE", "1")
            .status()?;
        return Ok(ExitCode::from(
            status
                .code()
                .and_then(|c| u8::try_from(c).ok())
                .unwrap_or(exit::INTERNAL),
        ));
    }
    let code = read(file)?;
    let source = UserSource::new(&code, options)?;
    let archs: Vec<String> = if arch.is_empty() {
        match Runtime::new(DeviceRequest::Auto, cfg)
            .ok()
            .and_then(|rt| rt.cuda().map(|c| c.info().arch()))
        {
            Some(a) => vec![a],
            None => vec!["sm_80".into(), "sm_90".into()],
        }
    } else {
        arch.to_vec()
    };
    let mut report = Report {
        file: file.to_path_buf(),
        block,
        dynamic_shared: shared,
        targets: BTreeMap::new(),
        sanitizer: None,
    };
    for a in &archs {
        let limits = sm_limits(a).ok_or_else(|| {
            Error::invalid(
                "kiln kernel check",
                format!("--arch {a}: kiln knows sm_70 to sm_120 (e.g. sm_80, sm_90)"),
            )
        })?;
        let shown = file.file_name().map(|f| f.to_string_lossy().into_owned());
        let resources = match source.resources(a, shown.as_deref()) {
            Ok(r) => r,
            Err(Error::Compile { log, .. }) => {
                eprintln!("{}: does not compile for {a}:\n{log}", file.display());
                return Ok(ExitCode::from(exit::INVALID));
            }
            Err(e) => return Err(e.into()),
        };
        if let Some(n) = name {
            if !resources.contains_key(n) {
                let have: Vec<&str> = resources.keys().map(String::as_str).collect();
                return Err(Error::invalid(
                    "kiln kernel check",
                    format!("--name {n}: the file's kernels are {}", have.join(", ")),
                )
                .into());
            }
        }
        let mut per = BTreeMap::new();
        for (k, r) in resources.into_iter().filter(|(k, _)| name.is_none_or(|n| n == k)) {
            let o = occupancy(&r, &limits, block, shared);
            let mut warnings = Vec::new();
            if r.spill_stores + r.spill_loads > 0 {
                warnings.push(format!(
                    "spills {} B stored, {} B loaded to local memory: fewer live values or -maxrregcount higher",
                    r.spill_stores, r.spill_loads
                ));
            }
            match &o {
                None => warnings.push(format!("a block of {block} threads with {shared} B of dynamic shared memory does not fit an SM of {a}")),
                Some(o) if o.fraction < 0.25 => warnings.push(format!(
                    "occupancy {:.0}% (limited by {}): latency will show",
                    o.fraction * 100.0,
                    o.limited_by
                )),
                _ => {}
            }
            per.insert(
                k,
                KernelReport {
                    resources: r,
                    occupancy: o.map(|o| o.fraction),
                    blocks_per_sm: o.map(|o| o.blocks_per_sm),
                    limited_by: o.map(|o| o.limited_by),
                    warnings,
                },
            );
        }
        report.targets.insert(a.clone(), per);
    }
    let mut sanitizer_failed = false;
    if let Some(launch) = sanitize {
        let Some(tool) = compute_sanitizer() else {
            eprintln!(
                "compute-sanitizer was not found (PATH, $KILN_COMPUTE_SANITIZER, /usr/local/cuda/bin): \
                 install the CUDA toolkit, or `pip install nvidia-cuda-sanitizer-api-cu12` and set \
                 KILN_COMPUTE_SANITIZER to its compute-sanitizer"
            );
            return Ok(ExitCode::from(exit::NO_DEVICE));
        };
        let mut results = BTreeMap::new();
        for t in ["memcheck", "racecheck"] {
            let exe = std::env::current_exe()?;
            let mut cmd = std::process::Command::new(&tool);
            cmd.args(["--tool", t, "--error-exitcode", "99"]).arg(&exe);
            cmd.arg("--device")
                .arg(request.to_string())
                .args(["kernel", "run"])
                .arg(file)
                .arg("--launch")
                .arg(launch);
            for o in &source
                .options()
                .iter()
                .filter(|o| options.contains(o))
                .collect::<Vec<_>>()
            {
                cmd.arg(format!("--option={o}"));
            }
            let out = cmd.output()?;
            let text =
                String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
            let verdict = match out.status.code() {
                Some(0) => "no errors".to_string(),
                Some(99) => {
                    sanitizer_failed = true;
                    format!("ERRORS:\n{}", text.trim())
                }
                c => {
                    sanitizer_failed = true;
                    format!("the launch failed (exit {c:?}):\n{}", text.trim())
                }
            };
            results.insert(t.to_string(), verdict);
        }
        report.sanitizer = Some(results);
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_report(&report);
    }
    Ok(ExitCode::from(if sanitizer_failed {
        exit::VERIFY
    } else {
        exit::OK
    }))
}

fn print_report(r: &Report) {
    println!(
        "{} (occupancy at {} threads a block, {} B dynamic shared memory)",
        r.file.display(),
        r.block,
        r.dynamic_shared
    );
    for (arch, kernels) in &r.targets {
        for (k, x) in kernels {
            let occ = x
                .occupancy
                .map(|o| {
                    format!(
                        "{:.0}% ({} blocks/SM, {})",
                        o * 100.0,
                        x.blocks_per_sm.unwrap_or(0),
                        x.limited_by.unwrap_or("")
                    )
                })
                .unwrap_or_else(|| "does not fit".into());
            println!(
                "  {arch}  {k}: {} registers, {} B shared, {} B local (stack), spills {}/{} B, occupancy {occ}",
                x.resources.registers,
                x.resources.shared_bytes,
                x.resources.stack_bytes,
                x.resources.spill_stores,
                x.resources.spill_loads
            );
            for w in &x.warnings {
                println!("    warning: {w}");
            }
        }
    }
    if let Some(s) = &r.sanitizer {
        for (t, v) in s {
            println!("  compute-sanitizer {t}: {v}");
        }
    }
}

/// compute-sanitizer: `$KILN_COMPUTE_SANITIZER`, then PATH, then /usr/local/cuda/bin.
fn compute_sanitizer() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("KILN_COMPUTE_SANITIZER").map(PathBuf::from) {
        return p.is_file().then_some(p);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/local/cuda/bin")])
        .map(|d| d.join("compute-sanitizer"))
        .find(|p| p.is_file())
}

fn dim3(v: &[u32], what: &str) -> anyhow::Result<(u32, u32, u32)> {
    match v {
        [x] => Ok((*x, 1, 1)),
        [x, y] => Ok((*x, *y, 1)),
        [x, y, z] => Ok((*x, *y, *z)),
        _ => Err(Error::invalid("kiln kernel run", format!("{what} {v:?}: give 1 to 3 numbers")).into()),
    }
}

fn elem(name: &str) -> anyhow::Result<ScalarType> {
    use ScalarType as S;
    Ok(match name {
        "bool" => S::Bool,
        "int8" => S::I8,
        "int16" => S::I16,
        "int32" => S::I32,
        "int64" => S::I64,
        "uint8" => S::U8,
        "uint16" => S::U16,
        "uint32" => S::U32,
        "uint64" => S::U64,
        "float16" => S::F16,
        "bfloat16" => S::BF16,
        "float32" => S::F32,
        "float64" => S::F64,
        other => return Err(Error::invalid("kiln kernel run", format!("dtype `{other}`: use int8..int64, uint8..uint64, float16, bfloat16, float32, float64 or bool")).into()),
    })
}

/// `n` elements of `t` as bytes, filled as `fill` says.
fn fill_bytes(t: ScalarType, n: usize, fill: &str) -> anyhow::Result<Vec<u8>> {
    let value = |i: usize| -> f64 {
        match fill {
            "ones" => 1.0,
            "arange" => i as f64,
            // a fixed, well-spread sequence (the golden ratio's fractional parts)
            "random" => (i as f64 * 0.618_033_988_749_895).fract(),
            _ => 0.0,
        }
    };
    if !matches!(fill, "zeros" | "ones" | "arange" | "random") {
        return Err(Error::invalid(
            "kiln kernel run",
            format!("fill `{fill}`: use zeros, ones, arange or random"),
        )
        .into());
    }
    let mut out = Vec::with_capacity(n * t.size_bytes());
    for i in 0..n {
        let v = value(i);
        match t {
            ScalarType::Bool => out.push(u8::from(v != 0.0)),
            ScalarType::I8 => out.extend((v as i8).to_ne_bytes()),
            ScalarType::I16 => out.extend((v as i16).to_ne_bytes()),
            ScalarType::I32 => out.extend((v as i32).to_ne_bytes()),
            ScalarType::I64 => out.extend((v as i64).to_ne_bytes()),
            ScalarType::U8 => out.extend((v as u8).to_ne_bytes()),
            ScalarType::U16 => out.extend((v as u16).to_ne_bytes()),
            ScalarType::U32 => out.extend((v as u32).to_ne_bytes()),
            ScalarType::U64 => out.extend((v as u64).to_ne_bytes()),
            ScalarType::F16 => out.extend(f16::from_f64(v).to_ne_bytes()),
            ScalarType::BF16 => out.extend(bf16::from_f64(v).to_ne_bytes()),
            ScalarType::F32 => out.extend((v as f32).to_ne_bytes()),
            ScalarType::F64 => out.extend(v.to_ne_bytes()),
        }
    }
    Ok(out)
}

fn scalar(t: ScalarType, v: f64) -> Scalar {
    match t {
        ScalarType::Bool => Scalar::Bool(v != 0.0),
        ScalarType::I8 => Scalar::I8(v as i8),
        ScalarType::I16 => Scalar::I16(v as i16),
        ScalarType::I32 => Scalar::I32(v as i32),
        ScalarType::I64 => Scalar::I64(v as i64),
        ScalarType::U8 => Scalar::U8(v as u8),
        ScalarType::U16 => Scalar::U16(v as u16),
        ScalarType::U32 => Scalar::U32(v as u32),
        ScalarType::U64 => Scalar::U64(v as u64),
        ScalarType::F16 => Scalar::F16(f16::from_f64(v)),
        ScalarType::BF16 => Scalar::BF16(bf16::from_f64(v)),
        ScalarType::F32 => Scalar::F32(v as f32),
        ScalarType::F64 => Scalar::F64(v),
    }
}

/// Launch once as `launch` describes and wait for the device.
fn run_once(
    file: &Path,
    launch: &Path,
    options: &[String],
    request: DeviceRequest,
    cfg: &Config,
) -> anyhow::Result<()> {
    let code = read(file)?;
    let text = read(launch)?;
    let l: Launch = serde_json::from_str(&text)
        .map_err(|e| Error::invalid("kiln kernel run", format!("{}: {e}", launch.display())))?;
    let rt = Runtime::new(
        if request == DeviceRequest::Auto {
            DeviceRequest::Cuda(None)
        } else {
            request
        },
        cfg,
    )?;
    let cuda = rt.cuda().ok_or_else(|| {
        Error::invalid(
            "kiln kernel run",
            "raw CUDA kernels need a GPU; this runtime computes on the CPU",
        )
    })?;
    let module = cuda.user_module(&code, options)?;
    let f = module.function(&l.name)?;
    let mut buffers = Vec::new();
    for a in &l.args {
        if let LaunchArg::Array { array, len, fill } = a {
            let t = elem(array)?;
            // each array its own exact allocation, so memcheck sees an access past its end
            let b = UnpooledBuffer::upload(cuda.stream().context(), &fill_bytes(t, *len, fill)?)?;
            buffers.push((b, t, *len));
        }
    }
    let mut args = Vec::new();
    let mut next = buffers.iter();
    for a in &l.args {
        args.push(match a {
            LaunchArg::Array { .. } => {
                let (b, t, n) = next
                    .next()
                    .ok_or_else(|| Error::invalid("kiln kernel run", "internal: buffer count"))?;
                KernelArg::external(b.device_ptr(), *t, *n)
            }
            LaunchArg::Scalar { scalar: s, value } => KernelArg::Scalar(scalar(elem(s)?, *value)),
        });
    }
    // kiln's own stream; every array is a live allocation of this context holding `len`
    // elements, kept in `buffers` until after the synchronisation
    f.launch(
        cuda,
        dim3(&l.grid, "grid")?,
        dim3(&l.block, "block")?,
        l.shared_mem,
        &args,
    )?;
    cuda.synchronize()?;
    drop(buffers);
    Ok(())
}
