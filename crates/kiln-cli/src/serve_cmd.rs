//! `kiln serve`: the job service (see kiln-service and docs/operations.md), and the hidden
//! `kiln worker` it starts for each worker slot.

use kiln::{Config, DeviceRequest};
use kiln_service::config::{GpuSelection, ServiceConfig};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// `kiln serve` flags (each overrides the service config file and the environment).
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Service configuration (TOML; see docs/operations.md). Separate from --config, which
    /// is kiln's device and cache configuration.
    #[arg(long, value_name = "FILE", env = "KILN_SERVICE_CONFIG")]
    service_config: Option<PathBuf>,
    /// Address to listen on (default 127.0.0.1:8080; port 0 picks one and prints it).
    #[arg(long, value_name = "ADDR")]
    listen: Option<String>,
    /// Directory of the job store, blobs and results.
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// The job store: `sqlite` (default, one node) or `postgres://user@host:port/db` (many
    /// nodes sharing one queue). Also KILN_STORE_URL or `store.url` in the service config.
    #[arg(long, value_name = "URL")]
    store_url: Option<String>,
    /// Tokens file: `NAME sha256:HEX|TOKEN [kinds=a,b] [max_in_flight=N]` per line.
    #[arg(long, value_name = "FILE")]
    tokens_file: Option<PathBuf>,
    /// CPU worker processes.
    #[arg(long, value_name = "N")]
    cpu_workers: Option<usize>,
    /// GPUs with a worker: auto, none, or ordinals like 0,1 (--device cpu means none).
    #[arg(long, value_name = "LIST")]
    gpus: Option<String>,
    /// A worker process owning several devices (repeat for more): 0,1 / all / cpu+0,1, as
    /// `kiln price --devices`; option books and element-wise maps are split over them.
    /// Replaces `workers.groups`; the groups are then the GPU workers (--gpus unused).
    #[arg(long = "worker-group", value_name = "DEVICES")]
    worker_groups: Vec<String>,
    /// Dynamic batching of small same-kind jobs: on or off.
    #[arg(long, value_name = "on|off", value_parser = parse_on_off)]
    batching: Option<bool>,
    /// Jobs per batch at most.
    #[arg(long, value_name = "N")]
    max_batch: Option<usize>,
    /// Milliseconds the oldest job waits for a batch to fill.
    #[arg(long, value_name = "MS")]
    max_queue_delay_ms: Option<u64>,
    /// Jobs an unbatched slot claims at most in one store call (1: one at a time).
    #[arg(long, value_name = "N")]
    claim_batch: Option<usize>,
    /// Jobs queued or running at most (beyond: 429 with Retry-After).
    #[arg(long, value_name = "N")]
    max_queue: Option<u64>,
    /// Attempts per job (worker crashes and sticky errors count).
    #[arg(long, value_name = "N")]
    max_attempts: Option<u32>,
    /// Bytes of a job submission's body at most.
    #[arg(long, value_name = "BYTES")]
    max_body_bytes: Option<u64>,
    /// Accept the `fault` job kind (drills and tests only).
    #[arg(long)]
    allow_fault_injection: bool,
    /// Accept the `user_kernel` job kind: tenants' own element-wise, reduction and raw CUDA
    /// kernels, each run in a supervised worker (off by default: 403 `forbidden`). A raw
    /// kernel can read any memory its worker's context maps; see docs/operations.md.
    #[arg(long)]
    allow_user_kernels: bool,
    /// Serve HTTPS with this PEM certificate chain (with --tls-key; or `[tls]` in the
    /// service config).
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Print the effective service configuration (tokens redacted) and exit.
    #[arg(long)]
    print_config: bool,
}

fn parse_on_off(s: &str) -> Result<bool, String> {
    match s {
        "on" | "true" | "1" => Ok(true),
        "off" | "false" | "0" => Ok(false),
        _ => Err(format!("`{s}`: use on or off")),
    }
}

fn effective(args: &Args, device: DeviceRequest) -> anyhow::Result<ServiceConfig> {
    let env = |k: &str| std::env::var(k).ok();
    let mut c = ServiceConfig::load(args.service_config.as_deref(), &env).map_err(|e| anyhow::anyhow!(e))?;
    if let Some(v) = &args.listen {
        c.listen = v.clone();
    }
    if let Some(v) = &args.data_dir {
        c.data_dir = v.clone();
    }
    if let Some(v) = &args.tokens_file {
        c.tokens_file = Some(v.clone());
    }
    if let Some(v) = &args.store_url {
        c.store.url = v.clone();
    }
    if let (Some(cert), Some(key)) = (&args.tls_cert, &args.tls_key) {
        c.tls = Some(kiln_service::config::TlsConfig {
            cert: cert.clone(),
            key: key.clone(),
        });
    }
    if let Some(v) = args.cpu_workers {
        c.workers.cpu_workers = v;
    }
    match device {
        DeviceRequest::Cpu => c.workers.gpus = GpuSelection::None,
        DeviceRequest::Cuda(Some(n)) => c.workers.gpus = GpuSelection::List(vec![n]),
        _ => {}
    }
    if let Some(v) = &args.gpus {
        c.workers.gpus = GpuSelection::parse(v).map_err(|e| anyhow::anyhow!("--gpus: {e}"))?;
    }
    if !args.worker_groups.is_empty() {
        c.workers.groups = args.worker_groups.clone();
        if matches!(c.workers.gpus, GpuSelection::List(_)) && args.gpus.is_none() {
            // a list from the config file or --device cuda:N yields to the groups
            c.workers.gpus = GpuSelection::Auto;
        }
    }
    if let Some(v) = args.batching {
        c.batching.enabled = v;
    }
    if let Some(v) = args.max_batch {
        c.batching.max_batch = v;
    }
    if let Some(v) = args.max_queue_delay_ms {
        c.batching.max_queue_delay_ms = v;
    }
    if let Some(v) = args.claim_batch {
        c.batching.claim_batch = v;
    }
    if let Some(v) = args.max_queue {
        c.limits.max_queue = v;
    }
    if let Some(v) = args.max_attempts {
        c.workers.max_attempts = v;
    }
    if let Some(v) = args.max_body_bytes {
        c.limits.max_body_bytes = v;
    }
    if args.allow_fault_injection {
        c.allow_fault_injection = true;
    }
    if args.allow_user_kernels {
        c.allow_user_kernels = true;
    }
    c.validate()
        .map_err(|e| anyhow::anyhow!(kiln::Error::invalid("service config", e)))?;
    Ok(c)
}

/// Run `kiln serve` until SIGTERM / SIGINT.
pub fn run(
    args: &Args,
    device: DeviceRequest,
    cfg: &Config,
    core_path: Option<&Path>,
) -> anyhow::Result<ExitCode> {
    let c = effective(args, device)?;
    if args.print_config {
        let mut shown = c.clone();
        shown.store.url = kiln_service::config::redact_url(&shown.store.url);
        for t in &mut shown.tokens {
            if t.token.is_some() {
                t.token = Some("(redacted)".into());
            }
        }
        println!("{shown:#?}");
        return Ok(ExitCode::SUCCESS);
    }
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get()).max(2);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()?;
    let data_dir = c.data_dir.clone();
    let scheme = if c.tls.is_some() { "https" } else { "http" };
    let opts = kiln_service::ServeOptions {
        cfg: c,
        core: cfg.clone(),
        core_config_path: core_path.map(Path::to_path_buf).or_else(|| cfg.file.clone()),
    };
    rt.block_on(kiln_service::serve(opts, |addr| {
        println!(
            "kiln serve: listening on {scheme}://{addr} (data dir {})",
            data_dir.display()
        );
        let _ = std::io::stdout().flush();
    }))
    .map_err(|e| match e {
        kiln_service::ServeError::Config(m) => anyhow::anyhow!(kiln::Error::invalid("kiln serve", m)),
        other => anyhow::anyhow!(other),
    })?;
    Ok(ExitCode::SUCCESS)
}
