#!/usr/bin/env bash
# Throughput of 1, 2 and 3 `kiln serve` nodes (one CPU worker each) sharing one PostgreSQL
# queue on this machine: a throwaway cluster (scripts/pg-test-cluster.sh), a release build,
# and the ignored measurement in crates/kiln-cli/tests/pg_throughput.rs, which prints a
# Markdown table (docs/deployment.md, "Throughput").
#   scripts/pg-throughput.sh                       # 10 s per row, 16 clients
#   KILN_PG_TP_SECS=20 KILN_PG_TP_CLIENTS=32 scripts/pg-throughput.sh
set -euo pipefail
cd "$(dirname "$0")/.."
exec bash scripts/pg-test-cluster.sh run \
  cargo test --release -p kiln-cli --test pg_throughput -- --ignored --nocapture --test-threads 1
