"""``cupy._core``: only what the tests import by name. CuPy's internal reduction functions
(``create_reduction_func``) are CuPy internals, not part of the user-kernel API: the factory
returns a function that raises when called."""

import importlib

_accelerator = importlib.import_module("._accelerator", __name__)
get_reduction_accelerators = _accelerator.get_reduction_accelerators
set_reduction_accelerators = _accelerator.set_reduction_accelerators


def create_reduction_func(*args, **kwargs):
    """CuPy's internal reduction-function factory; the result raises when called."""

    def internal(*a, **k):
        raise NotImplementedError("cupy._core.create_reduction_func is a CuPy internal")

    internal._cached_codes = {}
    return internal
