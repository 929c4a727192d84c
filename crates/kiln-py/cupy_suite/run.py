#!/usr/bin/env python3
"""Run CuPy's own user-kernel tests against kiln and count the outcome.

The tests are CuPy's files, unchanged, in ``upstream/`` (see README.md for their origin):
``test_userkernel.py`` (ElementwiseKernel), ``test_reduction.py`` (ReductionKernel) and
``test_raw.py`` (RawKernel, RawModule).

``--device cpu`` (CI): ``cupy`` is the NumPy-backed stand-in in ``shim/`` whose kernel
classes are kiln's, so every ``cupy.ElementwiseKernel(...)(x)`` runs on kiln's CPU path
with NumPy arrays. ``test_raw.py`` is not run: raw CUDA kernels need a GPU.

``--device gpu``: the real CuPy provides arrays and ``cupy.testing``; the files are patched
to kiln's names (``cupy.ElementwiseKernel`` -> ``kiln.ElementwiseKernel``, and the same for
``ReductionKernel``, ``RawKernel``, ``RawModule``), so kiln's kernels run on CuPy arrays.

Cases that test CuPy itself rather than the kernel API (its internal reduction functions,
``cupy.ndarray.sum``, texture objects, its compiler cache and NVCC/Jitify back ends) are
listed in INTERNAL with the reason and left out of the count. Cases that fail on a device
for a documented reason are listed in KNOWN with the reason; anything else that fails makes
the exit status 1, as does a pass rate below ``--min-pass``.
"""

import argparse
import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))

FILES = {
    "cpu": ["test_userkernel.py", "test_reduction.py"],
    "gpu": ["test_userkernel.py", "test_reduction.py", "test_raw.py"],
}

# (file, class-and-test glob) -> why the case is not a test of the kernel API.
INTERNAL = {
    ("test_reduction.py", "TestSimpleReductionFunction*"):
        "cupy._core.create_reduction_func and cupy.ndarray.sum: CuPy's own reductions",
    ("test_reduction.py", "TestReductionKernelCachedCode::test_simple_cached_code"):
        "cupy._core.create_reduction_func: CuPy's own reductions",
    ("test_reduction.py", "TestArgumentTypes::*"):
        "cupy._core.create_reduction_func and CuPy's array protocols",
    ("test_userkernel.py", "TestElementwiseKernelTexture*"):
        "CUDA texture objects built with cupy.cuda.texture",
    ("test_raw.py", "*NVCC*"): "CuPy's NVCC back end (kiln compiles with NVRTC only)",
    ("test_raw.py", "*(jitify)*"): "CuPy's Jitify back end",
    ("test_raw.py", "*, jitify)*"): "CuPy's Jitify back end",
    ("test_raw.py", "TestRawJitify::*"): "CuPy's Jitify back end",
    ("test_raw.py", "test_raw::test_jitify_deprecation_warning*"): "CuPy's Jitify deprecation",
    ("test_raw.py", "TestRaw::test_context_switch*"): "needs a second GPU (device 1)",
    ("test_raw.py", "TestRaw::test_load_hsaco*"): "ROCm/HIP only (CuPy skips it on CUDA)",
    ("test_raw.py", "TestCachePayload::*"):
        "cupy.cuda.compiler's cache payload encoding: CuPy's compiler cache, no kernel is built",
    ("test_raw.py", "TestRawNameExpressionCache::*"):
        "counts the saves of CuPy's compiler cache (cupy.cuda.compiler._kernel_cache_backend); "
        "kiln caches in its own directory (its name-expression lowering is tested in "
        "kiln-cuda's user tests and tests/test_raw_gpu.py)",
    ("test_raw.py", "TestRawGridSync::*"):
        "backend='nvcc' (CuPy's NVCC back end; CuPy itself skips these where nvcc >= 12.2); "
        "kiln's cooperative launch is tested in tests/test_raw_gpu.py",
    ("test_raw.py", "TestRawPicklable::*"):
        "backend='nvcc' (CuPy's NVCC back end); kiln's pickling with NVRTC is tested in "
        "tests/test_raw_cpu.py and tests/test_raw_gpu.py",
}

# (device, file, glob) -> why kiln fails the case today (none: complex dtypes, the last
# entry, are supported since issue 30).
KNOWN = {}

PATCH = [
    (r"\bcupy\.ElementwiseKernel\b", "kiln.ElementwiseKernel"),
    (r"\bcupy\.ReductionKernel\b", "kiln.ReductionKernel"),
    (r"\bcupy\.RawKernel\b", "kiln.RawKernel"),
    (r"\bcupy\.RawModule\b", "kiln.RawModule"),
    (r"^import cupy$", "import cupy\nimport kiln"),
]


def patched(text):
    """CuPy's test text with kiln's kernel classes in place of CuPy's."""
    for pat, rep in PATCH:
        text = re.sub(pat, rep, text, flags=re.M)
    return text


def lookup(table, keys, case):
    for key, why in table.items():
        if key[:-1] == keys and fnmatch.fnmatchcase(case, key[-1]):
            return why
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", choices=["cpu", "gpu"], required=True)
    ap.add_argument("--min-pass", type=float, default=0.9,
                    help="least share of the counted cases that must pass (default 0.9)")
    ap.add_argument("--json", help="write the counts and every case's outcome here")
    ap.add_argument("-k", help="pytest -k expression (to run a few cases)")
    args = ap.parse_args()

    work = tempfile.mkdtemp(prefix="kiln-cupy-suite-")
    try:
        for f in FILES[args.device]:
            with open(os.path.join(HERE, "upstream", f)) as src:
                text = src.read()
            with open(os.path.join(work, f), "w") as dst:
                dst.write(patched(text) if args.device == "gpu" else text)
        env = dict(os.environ)
        if args.device == "cpu":
            env["PYTHONPATH"] = os.path.join(HERE, "shim") + os.pathsep + env.get("PYTHONPATH", "")
        xml = os.path.join(work, "junit.xml")
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rN", "--continue-on-collection-errors",
               f"--junitxml={xml}", "-o", "junit_family=xunit1", *FILES[args.device]]
        if args.k:
            cmd += ["-k", args.k]
        subprocess.run(cmd, cwd=work, env=env, check=False)
        if not os.path.exists(xml):
            print("pytest wrote no report", file=sys.stderr)
            return 1
        cases = []
        for tc in ET.parse(xml).getroot().iter("testcase"):
            file = tc.get("file") or (tc.get("classname", "").split(".")[0] + ".py")
            cls = tc.get("classname", "").split(".")[-1]
            name = f"{cls}::{tc.get('name')}"
            if tc.find("failure") is not None or tc.find("error") is not None:
                el = tc.find("failure") if tc.find("failure") is not None else tc.find("error")
                outcome, detail = "failed", (el.get("message") or "")[:300]
            elif tc.find("skipped") is not None:
                outcome, detail = "skipped", (tc.find("skipped").get("message") or "")[:300]
            else:
                outcome, detail = "passed", ""
            internal = lookup(INTERNAL, (os.path.basename(file),), name)
            known = lookup(KNOWN, (args.device, os.path.basename(file)), name)
            cases.append(dict(file=os.path.basename(file), case=name, outcome=outcome,
                              detail=detail, internal=internal, known=known))
    finally:
        shutil.rmtree(work, ignore_errors=True)

    counted = [c for c in cases if not c["internal"]]
    passed = sum(c["outcome"] == "passed" for c in counted)
    skipped = [c for c in counted if c["outcome"] == "skipped"]
    failed = [c for c in counted if c["outcome"] == "failed"]
    unexpected = [c for c in failed + skipped if not c["known"]]
    rate = passed / len(counted) if counted else 0.0
    print(f"\n== CuPy's user-kernel tests on kiln ({args.device}): {passed} of {len(counted)} "
          f"counted cases pass ({100 * rate:.1f}%); {len(failed)} failed, {len(skipped)} "
          f"skipped; {len(cases) - len(counted)} cases test CuPy itself (internals, its NVCC and "
          f"Jitify back ends) or need two GPUs and are not counted")
    for c in failed + skipped:
        why = f"known: {c['known']}" if c["known"] else c["detail"].splitlines()[0] if c["detail"] else ""
        print(f"  {c['outcome']:7} {c['file']}::{c['case']}  {why}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(device=args.device, passed=passed, counted=len(counted),
                           rate=rate, cases=cases), f, indent=1)
    if rate < args.min_pass:
        print(f"pass rate {rate:.3f} is below --min-pass {args.min_pass}", file=sys.stderr)
        return 1
    if unexpected:
        print(f"{len(unexpected)} case(s) failed or skipped without a KNOWN reason", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
