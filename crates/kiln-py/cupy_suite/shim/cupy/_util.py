"""The names of ``cupy._util`` that CuPy's kernel tests import."""


class PerformanceWarning(RuntimeWarning):
    """CuPy's warning about a slow path."""
