"""``cupy._core._accelerator``: CuPy's CUB/cuTENSOR switches, kept as plain lists."""

_routine = []
_reduction = []


def get_routine_accelerators():
    """The routine accelerators in use (none here)."""
    return list(_routine)


def get_reduction_accelerators():
    """The reduction accelerators in use (none here)."""
    return list(_reduction)


def set_routine_accelerators(names):
    """Set the routine accelerators (recorded, never used)."""
    _routine[:] = list(names)


def set_reduction_accelerators(names):
    """Set the reduction accelerators (recorded, never used)."""
    _reduction[:] = list(names)
