#!/usr/bin/env bash
# The job service on a GPU machine (no Rust, no network there): the release `kiln` binary
# carried in .device/bin/kiln, python3 and curl from the machine.
#  1. `kiln serve` with one GPU worker and fault injection on;
#  2. an illegal-address kernel (a sticky CUDA error) poisons the worker: it is replaced,
#     the job retried on the fresh worker and the next jobs succeed; a job that faults on
#     every attempt fails with cuda_sticky after --max-attempts;
#  3. throughput of 100-option Monte Carlo jobs with dynamic batching on and off.
# Prints a short table last; logs go to $OUT (default a temp dir).
# Usage: bash scripts/service-gpu-check.sh   (KILN_BIN=path, JOBS=400, CLIENTS=64, PATHS=20000)
# A dry run without a GPU: WORKERS="--gpus none --cpu-workers 1" FAULT=abort (the sticky
# check then reads worker_crashed and says FAIL: that row needs a GPU).
set -euo pipefail
BIN=${KILN_BIN:-.device/bin/kiln}
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
JOBS=${JOBS:-400}
CLIENTS=${CLIENTS:-64}
PATHS=${PATHS:-20000}
WORKERS=${WORKERS:---gpus 0 --cpu-workers 0}
export FAULT=${FAULT:-illegal_address}
command -v python3 >/dev/null || { echo "python3 is needed"; exit 2; }
[ -x "$BIN" ] || { echo "no kiln binary at $BIN"; exit 2; }
DATA=$(mktemp -d)
PID=""
cleanup() { [ -n "$PID" ] && kill "$PID" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$DATA"; }
trap cleanup EXIT

start() { # $1: log name, rest: serve flags
  local log="$OUT/$1.log"; shift
  rm -rf "$DATA"/*
  KILN_LOG=info "$BIN" serve --listen 127.0.0.1:0 --data-dir "$DATA" $WORKERS "$@" >"$log" 2>&1 &
  PID=$!
  for _ in $(seq 1 600); do
    ADDR=$(grep -o 'http://[0-9.:]*' "$log" | head -1 || true)
    if [ -n "$ADDR" ] && curl -sf "$ADDR/readyz" >/dev/null; then return 0; fi
    kill -0 "$PID" 2>/dev/null || { echo "kiln serve died:"; cat "$log"; exit 1; }
    sleep 0.1
  done
  echo "kiln serve not ready after 60 s"; cat "$log"; exit 1
}
stop() { kill -TERM "$PID"; wait "$PID" || true; PID=""; }

export ADDR
py() { python3 - "$@"; }

# `fault` needs the flag and a token whose kinds name it
printf 'drill drill-token kinds=fault,price\n' > "$OUT/drill.tokens"
start faults --allow-fault-injection --max-attempts 2 --tokens-file "$OUT/drill.tokens"
# Warm the finance module (NVRTC on a cold cache) with one MC job.
py <<'PY' > "$OUT/fault.json"
import json, os, time, urllib.request
A = os.environ["ADDR"]
def call(method, path, body=None):
    req = urllib.request.Request(A + path, method=method, data=None if body is None else json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json", "Authorization": "Bearer drill-token"})
    try:
        with urllib.request.urlopen(req, timeout=300) as r: return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e: return e.code, json.loads(e.read() or b"null")
opt = {"option_type": "call", "style": "european", "spot": 100, "strike": 100, "rate": 0.05, "dividend": 0,
       "volatility": 0.2, "maturity": 1}
mc = {"kind": "price", "params": {"method": "mc", "paths": 200000, "steps": 64}, "inputs": {"options": [opt]}}
t = time.time(); s, warm = call("POST", "/v1/jobs?wait=120", mc); warm_s = time.time() - t
assert warm["state"] == "succeeded", warm
w0 = call("GET", "/v1/workers")[1][0]
# A fault on the first attempt only: the worker dies, the job is retried on a fresh worker.
t = time.time()
s, j = call("POST", "/v1/jobs?wait=120", {"kind": "fault", "params": {"mode": os.environ["FAULT"], "on_attempts": 1}})
retried_s = time.time() - t
w1 = call("GET", "/v1/workers")[1][0]
replaced_ms = (w1["ready_ms"] or 0) - (w1["exited_ms"] or 0)
# A fault on every attempt: failed with the sticky error after --max-attempts.
s, f = call("POST", "/v1/jobs?wait=120", {"kind": "fault", "params": {"mode": os.environ["FAULT"]}})
w2 = call("GET", "/v1/workers")[1][0]
# The next jobs succeed on the replacement worker.
nxt = [call("POST", "/v1/jobs?wait=120", mc)[1]["state"] for _ in range(5)]
ready = call("GET", "/readyz")[0]
print(json.dumps({"warm_s": warm_s, "retried": j, "retried_s": retried_s, "replaced_ms": replaced_ms,
                  "restarts_after_retry": w1["restarts"] - w0["restarts"], "always": f,
                  "restarts_total": w2["restarts"], "last_exit": w2["last_exit"], "next": nxt, "readyz": ready,
                  "device": warm["result"]["device"]}))
PY
stop

for b in on off; do
  start "batching-$b" --batching "$b" --max-batch 64 --max-queue-delay-ms 2
  JOBS=$JOBS CLIENTS=$CLIENTS PATHS=$PATHS py > "$OUT/throughput-$b.json" <<'PY'
import json, os, time, urllib.request, concurrent.futures as cf
A = os.environ["ADDR"]; N = int(os.environ["JOBS"]); C = int(os.environ["CLIENTS"]); P = int(os.environ["PATHS"])
def job(i):
    opts = [{"option_type": "call" if k % 2 else "put", "style": "european", "spot": 100, "strike": 80 + k * 0.4,
             "rate": 0.03, "dividend": 0.01, "volatility": 0.25, "maturity": 1} for k in range(100)]
    body = json.dumps({"kind": "price", "params": {"method": "mc", "paths": P, "steps": 32, "seed": 7},
                       "inputs": {"options": opts}}).encode()
    t = time.time()
    req = urllib.request.Request(A + "/v1/jobs?wait=300", data=body, method="POST", headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r: j = json.loads(r.read())
    assert j["state"] == "succeeded", j
    return time.time() - t
job(0)  # warm
t = time.time()
with cf.ThreadPoolExecutor(C) as ex: lat = sorted(ex.map(job, range(N)))
wall = time.time() - t
m = urllib.request.urlopen(A + "/metrics").read().decode()
val = lambda k: float(next((l.split()[-1] for l in m.splitlines() if l.startswith(k)), "0"))
print(json.dumps({"jobs": N, "wall_s": wall, "jobs_per_s": N / wall, "p50_ms": lat[N // 2] * 1e3,
                  "p99_ms": lat[min(N - 1, int(N * 0.99))] * 1e3,
                  "mean_batch": val("kiln_service_batch_size_sum") / max(1.0, val("kiln_service_batch_size_count"))}))
PY
  stop
done

python3 - "$OUT" <<'PY'
import json, sys
o = sys.argv[1]
f = json.load(open(f"{o}/fault.json"))
ok = lambda c: "PASS" if c else "FAIL"
print(f"\nkiln service on {f['device']} (logs in {o})")
print(f"| check | result | |\n| --- | --- | --- |")
print(f"| first MC job (cold start) | {f['warm_s']:.2f} s | |")
r = f["retried"]
print(f"| illegal address, fault on attempt 1 | {r['state']}, attempts {r['attempts']}, {f['retried_s']:.2f} s | {ok(r['state']=='succeeded' and r['attempts']==2)} |")
print(f"| worker replaced (exit -> ready) | {f['replaced_ms']} ms | {ok(0 < f['replaced_ms'] < 5000)} |")
a = f["always"]
print(f"| illegal address, every attempt | {a['state']} ({(a.get('error') or {}).get('code')}), attempts {a['attempts']} | {ok(a['state']=='failed' and (a.get('error') or {}).get('code')=='cuda_sticky')} |")
print(f"| next 5 jobs | {','.join(f['next'])} | {ok(all(s=='succeeded' for s in f['next']))} |")
print(f"| /readyz after faults | {f['readyz']} | {ok(f['readyz']==200)} |")
print("\n| 100-option MC jobs | jobs | jobs/s | p50 ms | p99 ms | mean batch |\n| --- | --- | --- | --- | --- | --- |")
for b in ("on", "off"):
    t = json.load(open(f"{o}/throughput-{b}.json"))
    print(f"| batching {b} | {t['jobs']} | {t['jobs_per_s']:.1f} | {t['p50_ms']:.1f} | {t['p99_ms']:.1f} | {t['mean_batch']:.1f} |")
PY
