"""A NumPy-backed stand-in for the ``cupy`` module, for running CuPy's own user-kernel tests
against kiln's CPU path (``run.py --device cpu``).

Arrays are NumPy arrays; ``ElementwiseKernel``, ``ReductionKernel``, ``RawKernel`` and
``RawModule`` are kiln's. The ``testing`` package holds the decorators CuPy's tests use,
which run a test body once with ``xp=numpy`` and once with ``xp=cupy`` (here: NumPy arrays,
kiln's kernels) and compare the results as CuPy's own decorators do. Whatever CuPy's tests
reach inside CuPy (``cupy._core.create_reduction_func``, ``cupy.cuda.texture``, CUB
accelerators) is absent or a stub that raises; ``run.py`` lists those cases as testing CuPy
internals.
"""

import importlib

import numpy
from numpy import *  # noqa: F401,F403  (dtypes and array constructors, as cupy has them)

import kiln

# Imported by name: `from numpy import *` bound `testing` (and others) to NumPy's modules,
# and `from . import testing` would return those instead of the submodules here.
_core = importlib.import_module("._core", __name__)
_util = importlib.import_module("._util", __name__)
cuda = importlib.import_module(".cuda", __name__)
exceptions = importlib.import_module(".exceptions", __name__)
testing = importlib.import_module(".testing", __name__)

ElementwiseKernel = kiln.ElementwiseKernel
ReductionKernel = kiln.ReductionKernel
RawKernel = getattr(kiln, "RawKernel", None)
RawModule = getattr(kiln, "RawModule", None)
ndarray = numpy.ndarray
random = numpy.random


def asnumpy(a, stream=None, order="C", out=None):
    """The array as a NumPy array (it already is one)."""
    return numpy.asarray(a, order=order)


def get_array_module(*args):
    """NumPy, for every argument."""
    return numpy
