import os

import pytest


def _gpu_reason():
    """None when a CUDA runtime is usable, else why not."""
    import kiln

    try:
        rt = kiln.Runtime("cuda")
    except kiln.KilnError as e:
        return f"no usable GPU: {e}"
    return None if rt.kind == "cuda" else "no usable GPU"


@pytest.fixture(scope="session")
def gpu():
    """Skip (with the reason) without a GPU; fail instead when KILN_REQUIRE_GPU=1."""
    reason = _gpu_reason()
    if reason is not None:
        if os.environ.get("KILN_REQUIRE_GPU") == "1":
            pytest.fail(f"KILN_REQUIRE_GPU=1 but {reason}")
        pytest.skip(reason)
    import kiln

    return kiln.Runtime("cuda")
