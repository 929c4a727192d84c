//! `kiln submit`: send a job to a `kiln serve` and print its id (or, with --wait, its
//! result), or a file of jobs (`--batch FILE.jsonl`, one job a line) through the batch
//! endpoint; the HTTP client `kiln jobs` shares.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

/// Where the server is and how to authenticate (shared by `kiln submit` and `kiln jobs`).
#[derive(clap::Args, Debug, Clone)]
pub struct ServerArgs {
    /// The server's base URL.
    #[arg(
        long,
        global = true,
        env = "KILN_SERVER",
        default_value = "http://127.0.0.1:8080"
    )]
    pub server: String,
    /// Bearer token (prefer the KILN_TOKEN variable: flags show in `ps`).
    #[arg(long, global = true, env = "KILN_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Print the server's JSON as is.
    #[arg(long, global = true)]
    pub json: bool,
}

/// `kiln submit` flags.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    server: ServerArgs,
    /// Job kind: price, filter2d, filter3d, gemm, elementwise.
    #[arg(long, required_unless_present_any = ["request", "batch"])]
    kind: Option<String>,
    /// Parameters: JSON text, or @FILE.
    #[arg(long, default_value = "{}")]
    params: String,
    /// Inputs: JSON text, or @FILE.
    #[arg(long, default_value = "{}")]
    inputs: String,
    /// The whole request body (JSON with kind, params, inputs) from FILE instead.
    #[arg(long, value_name = "FILE", conflicts_with = "kind")]
    request: Option<PathBuf>,
    /// Submit every job of FILE (JSON Lines: one request body a line, blank lines skipped)
    /// through POST /v1/jobs:batch, --batch-size jobs a request; prints one line a job
    /// (with --json, {"jobs": [...]}) in the file's order.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["kind", "request", "wait"])]
    batch: Option<PathBuf>,
    /// Jobs a batch request (at most the server's limits.max_batch_jobs).
    #[arg(long, value_name = "N", default_value_t = 1000, requires = "batch", value_parser = clap::value_parser!(u64).range(1..))]
    batch_size: u64,
    /// Wait up to this many seconds for the result.
    #[arg(long, value_name = "SECONDS")]
    wait: Option<f64>,
    /// Make a retried submit return the first job.
    #[arg(long)]
    idempotency_key: Option<String>,
}

/// A response: status and JSON body.
pub struct Reply {
    /// HTTP status.
    pub status: u16,
    /// The body (JSON; `null` if it was not JSON).
    pub body: Value,
}

/// The largest answer the client reads into memory (1 GiB).
const MAX_REPLY_BYTES: u64 = 1 << 30;

/// A blocking client of the job API.
pub struct Client {
    agent: ureq::Agent,
    base: String,
    token: Option<String>,
}

impl Client {
    /// A client for `args`, each call given `timeout` in all.
    pub fn new(args: &ServerArgs, timeout: Duration) -> Client {
        Client::with_timeout(args, Some(timeout))
    }

    /// A client for `args` whose calls take as long as they take (`None`), or `timeout`.
    pub fn with_timeout(args: &ServerArgs, timeout: Option<Duration>) -> Client {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(timeout)
            .build()
            .into();
        Client {
            agent,
            base: args.server.trim_end_matches('/').to_string(),
            token: args.token.clone(),
        }
    }

    fn finish(&self, r: Result<ureq::http::Response<ureq::Body>, ureq::Error>) -> anyhow::Result<Reply> {
        let mut r = r.map_err(|e| {
            let hint = if self.base.starts_with("https://") {
                " (kiln submit and kiln jobs speak plain HTTP only; call an HTTPS server with \
                 curl or another HTTPS client: the API is in docs/operations.md)"
            } else {
                ""
            };
            // a server URL may carry a password or token (user:pass@, ?token=): never printed
            let redact = kiln_service::config::redact_url;
            anyhow::anyhow!(
                "cannot reach {}: {}{hint}",
                redact(&self.base),
                redact(&e.to_string())
            )
        })?;
        let status = r.status().as_u16();
        // a body cut off (a streamed result whose reading failed on the server) or too
        // large to hold is an error, never an empty answer
        let text = r
            .body_mut()
            .with_config()
            .limit(MAX_REPLY_BYTES)
            .read_to_string()
            .map_err(|e| {
                anyhow::anyhow!(
                    "reading the server's answer: {e} (a job's result larger than {} MiB: \
                     `kiln jobs get ID --output FILE` saves it without holding it in memory)",
                    MAX_REPLY_BYTES >> 20
                )
            })?;
        let body = serde_json::from_str(&text).unwrap_or(Value::Null);
        Ok(Reply { status, body })
    }

    /// GET `path` and write a 2xx answer's body to `dest` as it arrives, atomically (a
    /// temporary file in `dest`'s directory, renamed into place once the whole body is
    /// read: a body cut off leaves no file). Returns the bytes written, or the server's
    /// error answer.
    pub fn get_to_file(&self, path: &str, dest: &std::path::Path) -> anyhow::Result<Result<u64, Reply>> {
        let mut req = self.agent.get(format!("{}{path}", self.base));
        if let Some(a) = self.auth() {
            req = req.header("Authorization", a);
        }
        let call = req.call();
        let ok = matches!(&call, Ok(r) if r.status().is_success());
        if !ok {
            return self.finish(call).map(Err);
        }
        let mut r = call.map_err(|e| anyhow::anyhow!("{e}"))?;
        let dir = match dest.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => std::path::Path::new("."),
        };
        let mut tmp = tempfile::Builder::new()
            .prefix(".kiln-tmp-")
            .tempfile_in(dir)
            .map_err(|e| anyhow::anyhow!("{}: a temporary file: {e}", dir.display()))?;
        let mut body = r.body_mut().with_config().limit(u64::MAX).reader();
        let n = std::io::copy(&mut body, &mut tmp)
            .map_err(|e| anyhow::anyhow!("reading the server's answer into {}: {e}", dest.display()))?;
        tmp.persist(dest)
            .map_err(|e| anyhow::anyhow!("{}: {}", dest.display(), e.error))?;
        Ok(Ok(n))
    }

    fn auth(&self) -> Option<String> {
        self.token.as_ref().map(|t| format!("Bearer {t}"))
    }

    /// GET `path` (with its query).
    pub fn get(&self, path: &str) -> anyhow::Result<Reply> {
        let mut req = self.agent.get(format!("{}{path}", self.base));
        if let Some(a) = self.auth() {
            req = req.header("Authorization", a);
        }
        self.finish(req.call())
    }

    /// GET `path` as text (`/metrics`), an error for a status other than 200.
    pub fn get_text(&self, path: &str) -> anyhow::Result<String> {
        let url = format!("{}{path}", self.base);
        let mut r = self.agent.get(&url).call().map_err(|e| {
            let redact = kiln_service::config::redact_url;
            anyhow::anyhow!("cannot reach {}: {}", redact(&self.base), redact(&e.to_string()))
        })?;
        let status = r.status().as_u16();
        let text = r.body_mut().with_config().limit(1 << 26).read_to_string()?;
        if status != 200 {
            anyhow::bail!("GET {path} answered {status}: {text}");
        }
        Ok(text)
    }

    /// DELETE `path`.
    pub fn delete(&self, path: &str) -> anyhow::Result<Reply> {
        let mut req = self.agent.delete(format!("{}{path}", self.base));
        if let Some(a) = self.auth() {
            req = req.header("Authorization", a);
        }
        self.finish(req.call())
    }

    /// POST JSON to `path`.
    pub fn post(&self, path: &str, body: &Value, idem: Option<&str>) -> anyhow::Result<Reply> {
        let mut req = self.agent.post(format!("{}{path}", self.base));
        if let Some(a) = self.auth() {
            req = req.header("Authorization", a);
        }
        if let Some(k) = idem {
            req = req.header("Idempotency-Key", k);
        }
        self.finish(req.send_json(body))
    }
}

/// The server's error as an anyhow error (invalid requests exit 4).
pub fn api_error(r: &Reply) -> anyhow::Error {
    let code = r.body["error"]["code"].as_str().unwrap_or("error").to_string();
    let msg = r.body["error"]["message"]
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| r.body.to_string());
    let text = format!("the server answered {} {code}: {msg}", r.status);
    if r.status == 400 || r.status == 413 || r.status == 422 {
        anyhow::anyhow!(kiln::Error::invalid("request", text))
    } else {
        anyhow::anyhow!(text)
    }
}

fn json_arg(what: &str, s: &str) -> anyhow::Result<Value> {
    let text = match s.strip_prefix('@') {
        Some(f) => std::fs::read_to_string(f).map_err(|e| anyhow::anyhow!("--{what} {f}: {e}"))?,
        None => s.to_string(),
    };
    serde_json::from_str(&text)
        .map_err(|e| anyhow::anyhow!(kiln::Error::invalid(what, format!("not JSON: {e}"))))
}

/// Print a job: JSON, or a line (and the result) for a person. Exit 1 for a failed job.
pub fn print_job(job: &Value, json: bool) -> ExitCode {
    if json {
        println!("{}", serde_json::to_string_pretty(job).unwrap_or_default());
    } else {
        let state = job["state"].as_str().unwrap_or("?");
        println!(
            "{} {} {} (attempts {})",
            job["id"].as_str().unwrap_or("?"),
            job["kind"].as_str().unwrap_or("?"),
            state,
            job["attempts"]
        );
        if !job["result"].is_null() {
            println!(
                "{}",
                serde_json::to_string_pretty(&job["result"]).unwrap_or_default()
            );
        }
        if !job["error"].is_null() {
            println!("error {}: {}", job["error"]["code"], job["error"]["message"]);
        }
    }
    if job["state"] == "failed" {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// Run `kiln submit`.
pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    if let Some(file) = &args.batch {
        return run_batch(
            &args.server,
            file,
            args.batch_size as usize,
            args.idempotency_key.as_deref(),
        );
    }
    let body = match &args.request {
        Some(f) => json_arg("request", &format!("@{}", f.display()))?,
        None => serde_json::json!({
            "kind": args.kind,
            "params": json_arg("params", &args.params)?,
            "inputs": json_arg("inputs", &args.inputs)?,
        }),
    };
    let wait = args.wait.unwrap_or(0.0).max(0.0);
    let client = Client::new(&args.server, Duration::from_secs_f64(60.0 + wait));
    let path = if wait > 0.0 {
        format!("/v1/jobs?wait={wait}")
    } else {
        "/v1/jobs".into()
    };
    let r = client.post(&path, &body, args.idempotency_key.as_deref())?;
    if !(200..300).contains(&r.status) {
        return Err(api_error(&r));
    }
    Ok(print_job(&r.body, args.server.json))
}

/// How long `--batch` keeps retrying a request answered 429 (no room in the queue or the
/// token's in-flight limit) before it gives up.
const BATCH_RETRY_FOR: Duration = Duration::from_secs(600);

/// The jobs of a JSON Lines file with their line numbers (blank lines skipped); a line that
/// is not a JSON object is an error naming it.
fn read_jsonl(file: &Path) -> anyhow::Result<Vec<(usize, Value)>> {
    let text =
        std::fs::read_to_string(file).map_err(|e| anyhow::anyhow!("--batch {}: {e}", file.display()))?;
    let mut jobs = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let at = || format!("{} line {}", file.display(), i + 1);
        let v: Value = serde_json::from_str(line).map_err(|e| {
            anyhow::anyhow!(kiln::Error::invalid("batch", format!("{}: not JSON: {e}", at())))
        })?;
        if !v.is_object() {
            return Err(anyhow::anyhow!(kiln::Error::invalid(
                "batch",
                format!(
                    "{}: a job is a JSON object ({{\"kind\", \"params\", \"inputs\"}}), not {}",
                    at(),
                    v
                )
            )));
        }
        jobs.push((i + 1, v));
    }
    if jobs.is_empty() {
        return Err(anyhow::anyhow!(kiln::Error::invalid(
            "batch",
            format!("{} holds no jobs", file.display())
        )));
    }
    Ok(jobs)
}

/// A batch request's error with the job it names (`jobs[i]: ...`) given by its line.
fn batch_error(r: &Reply, file: &Path, lines: &[usize]) -> anyhow::Error {
    let msg = r.body["error"]["message"].as_str().unwrap_or_default();
    let named = msg.strip_prefix("jobs[").and_then(|rest| {
        let (i, tail) = rest.split_once("]: ")?;
        Some((lines.get(i.parse::<usize>().ok()?)?, tail))
    });
    let Some((line, tail)) = named else {
        return api_error(r);
    };
    let mut r2 = Reply {
        status: r.status,
        body: r.body.clone(),
    };
    r2.body["error"]["message"] = Value::String(format!("{} line {line}: {tail}", file.display()));
    api_error(&r2)
}

/// A progress bar on stderr for `n` jobs, where stderr is a terminal and they take more
/// than one request.
fn batch_progress(n: usize, per_request: usize) -> Option<indicatif::ProgressBar> {
    use std::io::IsTerminal;
    (n > per_request && std::io::stderr().is_terminal()).then(|| {
        let pb =
            indicatif::ProgressBar::with_draw_target(Some(n as u64), indicatif::ProgressDrawTarget::stderr());
        let style =
            indicatif::ProgressStyle::with_template("submitting [{bar:40}] {pos}/{len} jobs (eta {eta})")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar());
        pb.set_style(style);
        pb
    })
}

/// `kiln submit --batch FILE`: the file's jobs, `per_request` a request, in order. Each
/// request is all or nothing; a refused one stops the run naming its job's line (the jobs
/// of earlier requests stay accepted, and are printed). With `idem`, request k carries the
/// key `IDEM.k`, so running the same file with the same key again after a failure returns
/// the jobs already accepted instead of submitting them twice.
fn run_batch(
    server: &ServerArgs,
    file: &Path,
    per_request: usize,
    idem: Option<&str>,
) -> anyhow::Result<ExitCode> {
    let jobs = read_jsonl(file)?;
    let client = Client::new(server, Duration::from_secs(120));
    let bar = batch_progress(jobs.len(), per_request);
    let mut all: Vec<Value> = Vec::new();
    let mut outcome = Ok(());
    for (k, chunk) in jobs.chunks(per_request).enumerate() {
        let lines: Vec<usize> = chunk.iter().map(|(l, _)| *l).collect();
        let body = serde_json::json!({ "jobs": chunk.iter().map(|(_, v)| v).collect::<Vec<_>>() });
        let key = idem.map(|i| format!("{i}.{k}"));
        let started = std::time::Instant::now();
        let r = loop {
            let r = client.post("/v1/jobs:batch", &body, key.as_deref())?;
            if r.status != 429 || started.elapsed() > BATCH_RETRY_FOR {
                break r;
            }
            // the service's Retry-After is 1 s
            std::thread::sleep(Duration::from_secs(1));
        };
        if !(200..300).contains(&r.status) {
            outcome = Err(batch_error(&r, file, &lines));
            break;
        }
        let answered = r.body["jobs"].as_array().cloned().unwrap_or_default();
        if answered.len() != chunk.len() {
            outcome = Err(anyhow::anyhow!(
                "the server answered {} jobs for a request of {}",
                answered.len(),
                chunk.len()
            ));
            break;
        }
        if !server.json {
            for j in &answered {
                println!(
                    "{} {} {}",
                    j["id"].as_str().unwrap_or("?"),
                    j["kind"].as_str().unwrap_or("?"),
                    j["state"].as_str().unwrap_or("?")
                );
            }
        }
        all.extend(answered);
        if let Some(pb) = &bar {
            pb.inc(chunk.len() as u64);
        }
    }
    if let Some(pb) = &bar {
        pb.finish_and_clear();
    }
    if server.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({ "jobs": all })).unwrap_or_default()
        );
    }
    match outcome {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(e) if all.is_empty() => Err(e),
        Err(e) => Err(e.context(format!(
            "{} jobs of {} were accepted before this request (printed above)",
            all.len(),
            jobs.len()
        ))),
    }
}
