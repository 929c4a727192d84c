//! `kiln jobs list|get|wait|cancel`: look at and manage jobs on a `kiln serve`.

use crate::submit_cmd::{api_error, print_job, Client, ServerArgs};
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// `kiln jobs` flags.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    server: ServerArgs,
    #[command(subcommand)]
    action: Action,
}

#[derive(clap::Subcommand, Debug)]
enum Action {
    /// Your jobs, newest first.
    List {
        /// Only queued, running, succeeded, failed or cancelled.
        #[arg(long)]
        state: Option<String>,
        /// Page size.
        #[arg(long, default_value_t = 20)]
        limit: u32,
        /// The `next_cursor` of a previous page.
        #[arg(long)]
        cursor: Option<String>,
    },
    /// One job, with its result.
    Get {
        /// The job id.
        id: String,
        /// Write the job's JSON (with its result) to this file as it arrives, instead of
        /// printing it: for results too large to hold in memory (a sharded book's can be
        /// gigabytes). Written atomically: a transfer cut off leaves no file.
        #[arg(long, value_name = "FILE")]
        output: Option<std::path::PathBuf>,
    },
    /// Wait for a job to finish and print it (exit 1 if it failed).
    Wait {
        /// The job id.
        id: String,
        /// Give up after this many seconds.
        #[arg(long, default_value_t = 300.0)]
        timeout: f64,
    },
    /// Cancel a job.
    Cancel {
        /// The job id.
        id: String,
    },
}

fn ok(r: crate::submit_cmd::Reply) -> anyhow::Result<serde_json::Value> {
    if (200..300).contains(&r.status) {
        Ok(r.body)
    } else {
        Err(api_error(&r))
    }
}

fn id_ok(id: &str) -> anyhow::Result<&str> {
    if !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        Ok(id)
    } else {
        Err(anyhow::anyhow!(kiln::Error::invalid(
            "job id",
            format!("`{id}` is not a job id")
        )))
    }
}

/// Run `kiln jobs`.
pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let json = args.server.json;
    match &args.action {
        Action::List { state, limit, cursor } => {
            let c = Client::new(&args.server, Duration::from_secs(60));
            let mut q = format!("/v1/jobs?limit={limit}");
            if let Some(s) = state {
                q.push_str(&format!("&state={s}"));
            }
            if let Some(cur) = cursor {
                q.push_str(&format!("&cursor={cur}"));
            }
            let body = ok(c.get(&q)?)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&body).unwrap_or_default());
            } else {
                println!("{:<34} {:<12} {:<10} {:>8}", "id", "kind", "state", "attempts");
                for j in body["jobs"].as_array().into_iter().flatten() {
                    println!(
                        "{:<34} {:<12} {:<10} {:>8}",
                        j["id"].as_str().unwrap_or(""),
                        j["kind"].as_str().unwrap_or(""),
                        j["state"].as_str().unwrap_or(""),
                        j["attempts"]
                    );
                }
                if let Some(n) = body["next_cursor"].as_str() {
                    println!("more: --cursor {n}");
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Action::Get { id, output: None } => {
            let c = Client::new(&args.server, Duration::from_secs(60));
            let job = ok(c.get(&format!("/v1/jobs/{}", id_ok(id)?))?)?;
            Ok(print_job(&job, json))
        }
        Action::Get {
            id,
            output: Some(dest),
        } => {
            // no overall timeout: a large result takes as long as its transfer takes
            let c = Client::with_timeout(&args.server, None);
            match c.get_to_file(&format!("/v1/jobs/{}", id_ok(id)?), dest)? {
                Ok(n) => {
                    eprintln!("job {id}: {n} bytes written to {}", dest.display());
                    Ok(ExitCode::SUCCESS)
                }
                Err(r) => Err(api_error(&r)),
            }
        }
        Action::Wait { id, timeout } => {
            let id = id_ok(id)?;
            let c = Client::new(&args.server, Duration::from_secs(90));
            let end = Instant::now() + Duration::from_secs_f64(timeout.max(0.0));
            loop {
                let left = end
                    .saturating_duration_since(Instant::now())
                    .as_secs_f64()
                    .min(30.0);
                let job = ok(c.get(&format!("/v1/jobs/{id}?wait={left:.3}"))?)?;
                let done = matches!(job["state"].as_str(), Some("succeeded" | "failed" | "cancelled"));
                if done || Instant::now() >= end {
                    if !done {
                        eprintln!("job {id} is still {} after {timeout} s", job["state"]);
                    }
                    return Ok(print_job(&job, json));
                }
            }
        }
        Action::Cancel { id } => {
            let c = Client::new(&args.server, Duration::from_secs(60));
            let job = ok(c.delete(&format!("/v1/jobs/{}", id_ok(id)?))?)?;
            Ok(print_job(&job, json))
        }
    }
}
