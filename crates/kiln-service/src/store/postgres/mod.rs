//! The PostgreSQL job store: many `kiln serve` nodes share one queue (see [`PgStore`]).

mod finish;
mod insert;
mod listen;
mod orphans;
mod rows;
mod schema;
mod shards;
mod store;

pub use schema::SCHEMA_VERSION;
pub use store::{parse_url, PgOptions, PgStore};
