"""Reads a kernel of ``docs/examples/kernels/`` (shared by the examples here)."""

from pathlib import Path

KERNELS = Path(__file__).resolve().parent.parent / "kernels"


def kernel_source(name: str) -> str:
    """The CUDA C source of ``kernels/<name>``."""
    return (KERNELS / name).read_text(encoding="utf-8")
