import os

import pytest


def _no_gpu_reason():
    """Why this machine has no GPU, or None where it has one.

    Only "no driver" or "no device" is a reason to skip (``NoDeviceError.no_gpu``); any
    other failure to start the CUDA runtime on a machine with a GPU fails the test."""
    import kiln

    try:
        rt = kiln.Runtime("cuda")
    except kiln.NoDeviceError as e:
        if getattr(e, "no_gpu", False):
            return f"no GPU: {e}"
        pytest.fail(f"this machine has a GPU but the CUDA runtime did not start: {e}")
    assert rt.kind == "cuda", f"Runtime('cuda') gave a {rt.kind} runtime"
    return None


def skip_or_fail(reason):
    """Skip with ``reason``, or fail when KILN_REQUIRE_GPU=1."""
    if os.environ.get("KILN_REQUIRE_GPU") == "1":
        pytest.fail(f"KILN_REQUIRE_GPU=1 but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def gpu():
    """Skip (with the reason) without a GPU; fail instead when KILN_REQUIRE_GPU=1."""
    reason = _no_gpu_reason()
    if reason is not None:
        skip_or_fail(reason)
    import kiln

    return kiln.Runtime("cuda")


def pytest_runtest_logreport(report):
    """Every skipped test is appended to the file named by KILN_SKIP_LOG (as the Rust tests'
    skips are), so the GPU runner counts skips from a file, not from captured output."""
    log = os.environ.get("KILN_SKIP_LOG")
    if log and report.skipped:
        reason = str(report.longrepr[-1]) if isinstance(report.longrepr, tuple) else str(report.longrepr)
        with open(log, "a", encoding="utf-8") as f:
            f.write(f"{report.nodeid}\t{reason.replace(chr(10), ' ')}\n")
