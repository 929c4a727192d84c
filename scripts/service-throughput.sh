#!/usr/bin/env bash
# The job service's throughput on this machine, one node: `kiln serve` on SQLite with
# synchronous = FULL (every 202 on disk) loaded by `kiln load` (keep-alive clients, tiny
# analytic pricing jobs) in four configurations: one job a request with ?wait= (dynamic
# batching on, then off) and the batch endpoint (100 and 1,000 jobs a request). Each
# configuration gets a fresh server and data directory. Prints one JSON object a line and
# a table; docs/performance.md quotes its runs.
#
#   KILN=target/release/kiln SECS=10 CLIENTS=32 WORKERS=4 bash scripts/service-throughput.sh [OUT.jsonl]
#
# ROWS picks configurations (default all four): `on` and `off` (one job a request, batching
# on / off), `b100` and `b1000` (the batch endpoint), e.g. ROWS="on b100".
set -euo pipefail
cd "$(dirname "$0")/.."
KILN=${KILN:-target/release/kiln}
SECS=${SECS:-10}
cores=$(nproc)
CLIENTS=${CLIENTS:-$((2 * cores))}
WORKERS=${WORKERS:-$(( cores / 4 > 2 ? cores / 4 : 2 ))}
ROWS=${ROWS:-on off b100 b1000}
out=${1:-/dev/null}
: > "$out"
port=18480
run() { # row name batching load-args...
  local row=$1 name=$2 batching=$3
  shift 3
  case " $ROWS " in *" $row "*) ;; *) return 0 ;; esac
  local dir
  dir=$(mktemp -d)
  port=$((port + 1))
  "$KILN" --device cpu serve --listen "127.0.0.1:$port" --data-dir "$dir" --cpu-workers "$WORKERS" \
    --batching "$batching" --max-batch 64 --max-queue-delay-ms 2 --max-queue 10000000 \
    > "$dir/serve.log" 2>&1 &
  local pid=$!
  for _ in $(seq 1 200); do
    python3 -c "import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=1)" \
      "http://127.0.0.1:$port/readyz" > /dev/null 2>&1 && break
    sleep 0.05
  done
  local r
  r=$("$KILN" load --server "http://127.0.0.1:$port" --duration "$SECS" --server-pid "$pid" --json "$@")
  kill -TERM "$pid"
  wait "$pid" || true
  rm -rf "$dir"
  python3 -c 'import json,sys; d=json.loads(sys.argv[2]); d["config"]=sys.argv[1]; d["host_cores"]=int(sys.argv[3]); d["workers"]=int(sys.argv[4]); print(json.dumps(d))' \
    "$name" "$r" "$cores" "$WORKERS" | tee -a "$out"
}
run on "single, batching on" on --clients "$CLIENTS"
run off "single, batching off" off --clients "$CLIENTS"
run b100 "batch 100" on --clients 8 --batch 100
run b1000 "batch 1000" on --clients 8 --batch 1000
