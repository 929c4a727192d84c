//! kiln-service: the job service behind `kiln serve`.
//!
//! Design, in the order a job meets it:
//! - [`api`]: the axum router ([`api::app`], drivable without a socket): bearer auth
//!   ([`auth`], SHA-256 hashes compared in constant time), limits (body size, elements,
//!   in-flight per token, a bounded queue answering 429 with `Retry-After`, request
//!   timeouts), errors mapped to HTTP in one exhaustive match ([`error`]), an OpenAPI
//!   document generated from the handlers.
//! - [`task`]: validation of each kind's params and inputs into the [`task::Task`] a worker
//!   runs ([`pricing`]: `price` jobs, mixed books of every option kind; [`user_kernel`]:
//!   users' own kernels, only with `allow_user_kernels`).
//! - [`store`]: the [`store::JobStore`] trait (claims under leases, results stored once)
//!   and its implementations: SQLite (WAL, group commit; one node) and PostgreSQL (many
//!   nodes sharing one queue: `FOR UPDATE SKIP LOCKED` claims, leases renewed by each
//!   node's heartbeat, LISTEN/NOTIFY wake-ups, a node registry). A job is stored before
//!   its 202.
//! - [`supervisor`]: one task per worker slot (a GPU, or a CPU worker) that starts a
//!   `kiln worker` process, claims batches (dynamic batching), talks length-prefixed
//!   frames ([`protocol`]) and replaces the process when it dies, hangs or hits a sticky
//!   CUDA error; jobs are retried up to `max_attempts`.
//! - [`worker`] / [`exec`]: the worker's loop, running tasks through the `kiln` facade;
//!   [`sandbox`]: the worker's environment (an allow-list) and the protections it applies
//!   to itself (memory limit, `no_new_privs`, seccomp); [`private`]: file modes.
//! - [`server`]: startup (recovery of jobs left running), the HTTP server and graceful
//!   shutdown; [`listener`]: the accept loop with its header-read and idle timeouts and
//!   connection cap, for plain TCP and TLS alike.
#![deny(missing_docs)]

pub mod api;
pub mod auth;
pub mod calibrate;
pub mod config;
pub mod error;
pub mod exec;
pub mod hub;
pub mod ids;
pub mod implied;
pub mod listener;
pub mod metrics;
pub mod pricing;
pub mod private;
pub mod protocol;
pub mod risk;
pub mod sandbox;
pub mod server;
pub mod shard;
pub mod store;
pub mod supervisor;
pub mod task;
pub mod tls;
pub mod user_kernel;
pub mod worker;

pub use config::ServiceConfig;
pub use error::{ApiError, ServeError};
pub use server::{serve, ServeOptions};
