#!/usr/bin/env bash
# `kiln kernel check --sanitize` on a GPU machine: a correct kernel passes memcheck and
# racecheck; one that writes past its array and one with a shared-memory race are caught
# (exit 5). Uses .device/bin/kiln (scripts/device-bundle.sh) and compute-sanitizer from
# PATH or /usr/local/cuda/bin.
set -u
cd "$(dirname "$0")/.."
K=${KILN_BIN:-.device/bin/kiln}
d=$(mktemp -d)
cat > "$d/k.cu" <<'CU'
extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
extern "C" __global__ void past_the_end(float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    y[i + n] = 1.0f;
}
extern "C" __global__ void racy(float* out) {
    __shared__ float s[32];
    s[threadIdx.x % 32] = threadIdx.x;
    out[threadIdx.x] = s[(threadIdx.x + 1) % 32];
}
CU
echo '{"name": "saxpy", "grid": [4], "block": [128], "args": [{"scalar": "float32", "value": 2}, {"array": "float32", "len": 512, "fill": "random"}, {"array": "float32", "len": 512}, {"scalar": "int32", "value": 512}]}' > "$d/ok.json"
echo '{"name": "past_the_end", "grid": [1], "block": [64], "args": [{"array": "float32", "len": 64}, {"scalar": "int32", "value": 64}]}' > "$d/oob.json"
echo '{"name": "racy", "grid": [1], "block": [64], "args": [{"array": "float32", "len": 64}]}' > "$d/race.json"
rc=0
"$K" kernel check "$d/k.cu" --block 128; [ $? = 0 ] || rc=1
"$K" kernel check "$d/k.cu" --name saxpy --sanitize "$d/ok.json"; r=$?; echo "saxpy: exit $r (want 0)"; [ $r = 0 ] || rc=1
"$K" kernel check "$d/k.cu" --name past_the_end --sanitize "$d/oob.json" | tail -n 12; r=${PIPESTATUS[0]}; echo "past_the_end: exit $r (want 5)"; [ $r = 5 ] || rc=1
"$K" kernel check "$d/k.cu" --name racy --sanitize "$d/race.json" | tail -n 12; r=${PIPESTATUS[0]}; echo "racy: exit $r (want 5)"; [ $r = 5 ] || rc=1
rm -rf "$d"
echo "kernel-check-gpu: rc=$rc"
exit $rc
