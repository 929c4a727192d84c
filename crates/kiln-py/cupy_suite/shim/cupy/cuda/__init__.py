"""``cupy.cuda``: a runtime stub (no HIP) and texture classes that cannot be built here."""

from . import runtime, texture  # noqa: F401
