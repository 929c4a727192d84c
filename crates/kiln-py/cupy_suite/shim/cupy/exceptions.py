"""``cupy.exceptions``: NumPy's, as CuPy re-exports them."""

from numpy.exceptions import AxisError, ComplexWarning  # noqa: F401
