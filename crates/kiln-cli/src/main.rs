//! `kiln`: the command-line front end.
//!
//! Every command takes `--device auto|cpu|cuda|cuda:N` and `--config FILE`; errors map to
//! the stable exit codes in [`exit`] (documented in the README and `kiln --help`).

mod bench_cmd;
mod cache_cmd;
mod calibrate_cmd;
mod demo;
mod devices_arg;
mod doctor;
mod exit;
mod filter_batch;
mod filter_cmd;
mod filter_devices;
mod filter_host;
mod filter_image;
mod filter_kernel;
mod filter_pipeline;
mod filter_volume;
mod gemm_cmd;
mod gemm_devices;
mod implied_vol_cmd;
mod jobs_cmd;
mod kernel_cmd;
mod kernels_cmd;
mod load_cmd;
mod monitor_cmd;
mod ndimage_array;
mod ndimage_cmd;
mod ndimage_distance;
mod ndimage_header;
mod ndimage_interp;
mod ndimage_interp_io;
mod ndimage_label;
mod ndimage_map_coords;
mod ndimage_measure;
mod ndimage_rank;
mod power_cmd;
mod price;
mod price_devices;
mod price_greeks;
mod risk_cmd;
mod row_files;
mod serve_cmd;
mod submit_cmd;
mod worker_cmd;

use clap::{Parser, Subcommand};
use kiln::{Config, DeviceRequest};
use std::path::PathBuf;
use std::process::ExitCode;

const AFTER_HELP: &str = "\
Devices: --device auto (default) takes the best usable GPU, else the CPU with one warning.
         --device cuda / cuda:N fails with exit code 3 when that GPU cannot be used.
Config:  defaults < TOML file (--config, KILN_CONFIG, ~/.config/kiln/config.toml) < environment
         (KILN_DEVICES=0,GPU-..., KILN_MIN_COMPUTE_CAPABILITY=7.0, KILN_CACHE_DIR=DIR).
Logging: KILN_LOG=info|debug|warn (default warn).
Profile: KILN_PROFILE=1 prints every named range (CUDA-event timed per stream, host ranges by
         wall clock) at exit; KILN_PROFILE=json prints JSON; --profile-json FILE writes it.
         NVTX ranges appear in Nsight Systems (nsys profile kiln ...).
Exit codes: 0 ok, 1 internal error, 2 usage, 3 device unavailable, 4 invalid input or config,
            5 verification failed, 6 out of GPU memory, 7 CUDA error, 8 CUDA context poisoned,
            9 benchmark regression (kiln bench --baseline).";

#[derive(Parser, Debug)]
#[command(name = "kiln", version, about = "GPU compute for imaging, finance and linear algebra, with a CPU fallback", after_help = AFTER_HELP)]
struct Cli {
    /// Device to run on: auto, cpu, cuda or cuda:N.
    #[arg(long, global = true, default_value = "auto", value_parser = parse_device)]
    device: DeviceRequest,
    /// Configuration file (TOML). Overrides KILN_CONFIG.
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Profile the command and write the report (every named range: count, total, mean,
    /// median, min, max ms, per stream) as JSON to FILE. KILN_PROFILE=1 prints it as a table
    /// on stderr at exit instead (KILN_PROFILE=json: JSON on stderr).
    #[arg(long, global = true, value_name = "FILE")]
    profile_json: Option<PathBuf>,
    /// Sync every output file to disk (fsync) before renaming it into place, so it survives
    /// a power loss. Off by default (outputs are still written atomically: a crash leaves the
    /// old file or the complete new one). Also KILN_SYNC=1.
    #[arg(long, global = true, env = "KILN_SYNC")]
    sync: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Check the environment: driver, libraries, devices, cache, config, and a trial kernel
    /// launch on each allowed GPU.
    Doctor(doctor::Args),
    /// The main job: run every op on generated data on the selected device, verify each
    /// against the CPU and print a table of times and errors.
    Demo(demo::Args),
    /// Inspect or manage the on-disk kernel cache.
    Cache(cache_cmd::Args),
    /// Price a portfolio of options from a CSV into a CSV of prices, standard errors and
    /// Greeks.
    ///
    /// Closed forms with --method analytic (the default; european and asian_geometric), Monte
    /// Carlo on the selected device with --method mc (every style, reproducible to the bit
    /// for a given --seed). Every bad row is reported with its row number and reason (exit 4,
    /// nothing written) unless --skip-invalid. Example:
    /// kiln price --input book.csv --output prices.csv --method mc --paths 200000 --json
    Price(price::Args),
    /// Review a user's CUDA kernel: registers, shared and local memory, spills and
    /// occupancy for each target (no GPU needed), and compute-sanitizer's memcheck and
    /// racecheck on one launch (--sanitize). Example:
    /// kiln kernel check saxpy.cu --arch sm_80,sm_90 --block 256
    Kernel(kernel_cmd::Args),
    /// Imply the Black-Scholes volatility of every European quote of a CSV into a CSV of
    /// volatilities, with the reason where a quote has none.
    ///
    /// Jäckel's "Let's Be Rational" on the CPU: machine precision for any moneyness and
    /// total volatility. Every bad row is reported with its row number, column and reason
    /// (exit 4, nothing written) unless --skip-invalid. Example:
    /// kiln implied-vol --input quotes.csv --output vols.csv --json
    ImpliedVol(implied_vol_cmd::Args),
    /// Portfolio risk by full revaluation: a book of options under every scenario of spot,
    /// volatility and rate shocks, the P&L per scenario, VaR and expected shortfall.
    ///
    /// Closed forms where they exist, Monte Carlo with common random numbers where not; the
    /// European Black-Scholes grid on the GPU when one is usable. Every bad row of the book
    /// and the scenarios is reported (exit 4, nothing written) unless --skip-invalid. Example:
    /// kiln risk --book book.csv --scenarios s.csv --levels 0.95,0.99 --pnl-out pnl.csv
    Risk(risk_cmd::Args),
    /// Fit Heston's kappa, theta, xi, rho, v0 to a CSV of European option prices or implied
    /// vols (optionally weighted), reporting RMSE in vol points, per-quote errors,
    /// iterations and the Feller condition.
    ///
    /// Levenberg-Marquardt on the semi-analytic price with its exact gradient, on the CPU.
    /// Every bad row is reported in one pass (exit 4, nothing fitted). Example:
    /// kiln calibrate --model heston --quotes surface.csv --start 1,0.1,0.5,-0.5,0.1 --json
    Calibrate(calibrate_cmd::Args),
    /// Filter a 2-D image (PNG, TIFF, NPY) with a preset or .npy kernel into a file of the
    /// same kind.
    ///
    /// scipy.ndimage.correlate semantics (no kernel flip) and boundary modes (default
    /// reflect); presets are scipy's filters (gaussian:S is gaussian_filter, box:K
    /// uniform_filter, sobel-x sobel(axis=1)). 8/16-bit images are filtered in f32 and
    /// written back rounded and clamped; .npy output is float32. Bad input exits 4 and
    /// writes nothing. --input a directory or a glob filters every file into --output, a
    /// directory, in one process (batch mode; see below). Example:
    /// kiln filter2d --input part.png --kernel gaussian:1.5 --mode reflect --output smooth.png
    Filter2d(filter_cmd::Args2d),
    /// Filter a 3-D volume (NIfTI .nii/.nii.gz, NPY) with a 3/5/7-sided preset or .npy
    /// kernel; a 4-D volume is filtered volume by volume.
    ///
    /// scipy.ndimage.correlate semantics and boundary modes (default reflect); the NIfTI
    /// header, affine and extensions are kept, the data written as float32. Bad input exits
    /// 4 and writes nothing. --input a directory or a glob filters every volume into
    /// --output, a directory (batch mode). Example:
    /// kiln filter3d --input t1.nii.gz --kernel gaussian:0.8 --output t1_smooth.nii.gz --json
    Filter3d(filter_cmd::Args3d),
    /// scipy.ndimage's functions by name with scipy's parameters (correlate, convolve,
    /// gaussian_filter, sobel, zoom, label, distance_transform_edt, mean, ...) on images,
    /// volumes and batches.
    ///
    /// Every boundary mode (reflect, constant, nearest, mirror, wrap, grid-wrap,
    /// grid-constant), kernels of any shape and origin, 8/16-bit images kept in their type.
    /// Example: kiln ndimage gaussian_filter --input t1.nii.gz --sigma 1,1,2 --output o.nii.gz
    Ndimage(Box<ndimage_cmd::Args>),
    /// Benchmark the workloads against the hardware's measured ceilings.
    ///
    /// Ceilings first (device copy and pinned host-to-device on a GPU, a host copy on the
    /// CPU), then per workload and size: output verified against the CPU reference, warm-up,
    /// CUDA-event (GPU) or wall-clock (CPU) timing, median / p10 / p90, floor and efficiency.
    /// --baseline exits 9 naming each workload slower than the baseline by more than
    /// --max-regression percent.
    ///
    /// Examples: `kiln bench --device cpu --sizes quick --json run.json`;
    /// `kiln bench --sizes full --json h200.json --peers peers.json --plot h200.svg`;
    /// `kiln bench show run.json --baseline base.json --max-regression 10`.
    Bench(bench_cmd::Args),
    /// Multiply generated matrices (batched, transposed, f32/tf32/bf16/f16) and print TFLOP/s;
    /// --check verifies C against an f64 reference (exit 5 outside the precision's bound).
    ///
    /// cuBLAS on a GPU (--impl kiln: kiln's tiled f32 kernel; --impl naive: the seed's
    /// baseline), faer on the CPU. Example:
    /// kiln gemm --m 8192 --n 8192 --k 8192 --precision bf16 --check --json
    Gemm(gemm_cmd::Args),
    /// List every kernel with registers, shared and local memory, thread limit and occupancy
    /// at its launch shape, read from the driver (needs a GPU: exit 3 without one).
    Kernels(kernels_cmd::Args),
    /// Watch the GPUs: a table like `nvidia-smi dmon` (--interval, --count), one JSON sample
    /// (--once --json), or /metrics and /health for Prometheus (--listen 127.0.0.1:9400),
    /// with alert rules (--rules FILE; see docs/monitoring.md). Works without NVML (host only).
    Monitor(monitor_cmd::Args),
    /// Show GPU power figures, or set a power limit (validated, needs root and --yes).
    Power(power_cmd::Args),
    /// Run the job service: an HTTP API with durable jobs, bearer tokens, limits, dynamic
    /// batching and supervised GPU/CPU worker processes (see docs/operations.md).
    ///
    /// Example: kiln serve --listen 127.0.0.1:8080 --data-dir /var/lib/kiln --tokens-file tokens
    Serve(serve_cmd::Args),
    /// Submit a job to a `kiln serve` (KILN_SERVER, KILN_TOKEN); --wait S prints its result.
    ///
    /// Example: kiln submit --kind price --params '{"method":"analytic"}' --inputs @book.json --wait 10
    Submit(submit_cmd::Args),
    /// List, get, wait for or cancel jobs on a `kiln serve`.
    Jobs(jobs_cmd::Args),
    /// Load a `kiln serve` with tiny pricing jobs from keep-alive clients and print jobs/s
    /// end to end, latency and the server's CPU per 1,000 jobs.
    ///
    /// Example: kiln load --server http://127.0.0.1:8080 --clients 16 --duration 10 --batch 100
    Load(load_cmd::Args),
    /// A worker process of `kiln serve` (started by it; not for people).
    #[command(hide = true)]
    Worker(worker_cmd::Args),
}

fn parse_device(s: &str) -> Result<DeviceRequest, String> {
    s.parse().map_err(|e: kiln::Error| e.to_string())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_env("KILN_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .without_time()
        .with_target(false)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    kiln_io::set_durable_writes(cli.sync);
    if cli.profile_json.is_some() {
        kiln::profiler().set_enabled(true);
    }
    let result = Config::load(cli.config.as_deref())
        .map_err(anyhow::Error::from)
        .and_then(|cfg| match &cli.command {
            Command::Doctor(a) => doctor::run(a, cli.device, &cfg),
            Command::Demo(a) => demo::run(a, cli.device, &cfg),
            Command::Cache(a) => cache_cmd::run(a, cli.device, &cfg),
            Command::Price(a) => price::run(a, cli.device, &cfg),
            Command::ImpliedVol(a) => implied_vol_cmd::run(a, cli.device, &cfg),
            Command::Risk(a) => risk_cmd::run(a, cli.device, &cfg),
            Command::Calibrate(a) => calibrate_cmd::run(a, cli.device, &cfg),
            Command::Filter2d(a) => filter_cmd::run_2d(a, cli.device, &cfg),
            Command::Filter3d(a) => filter_cmd::run_3d(a, cli.device, &cfg),
            Command::Ndimage(a) => ndimage_cmd::run(a, cli.device, &cfg),
            Command::Bench(a) => bench_cmd::run(a, cli.device, &cfg),
            Command::Kernel(a) => kernel_cmd::run(a, cli.device, &cfg),
            Command::Kernels(a) => kernels_cmd::run(a, cli.device, &cfg),
            Command::Gemm(a) => gemm_cmd::run(a, cli.device, &cfg),
            Command::Monitor(a) => monitor_cmd::run(a, cli.device, &cfg),
            Command::Power(a) => power_cmd::run(a, cli.device, &cfg),
            Command::Serve(a) => serve_cmd::run(a, cli.device, &cfg, cli.config.as_deref()),
            Command::Submit(a) => submit_cmd::run(a),
            Command::Jobs(a) => jobs_cmd::run(a),
            Command::Load(a) => load_cmd::run(a),
            Command::Worker(a) => worker_cmd::run(a, cli.device, &cfg),
        });
    let code = match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            exit::code_for(&e)
        }
    };
    report_profile(cli.profile_json.as_deref());
    code
}

/// The profiler's report at exit: JSON to `--profile-json FILE`, and/or per `KILN_PROFILE`.
fn report_profile(json_file: Option<&std::path::Path>) {
    let p = kiln::profiler();
    if !p.is_enabled() {
        return;
    }
    let report = p.report();
    if let Some(path) = json_file {
        let text = serde_json::to_string_pretty(&report).unwrap_or_default();
        if let Err(e) = std::fs::write(path, text + "\n") {
            eprintln!("warning: cannot write the profile to {}: {e}", path.display());
        }
    }
    match kiln::profiler::env_mode() {
        Some(true) => eprintln!("{}", serde_json::to_string(&report).unwrap_or_default()),
        Some(false) => eprint!("{report}"),
        None => {}
    }
}
