"""``cupy.testing._protocol_helpers``: wrappers exposing CuPy's array protocols; they need
CuPy arrays, so here they only hold the array."""


class DummyObjectWithCuPyGetNDArray:
    """An object with ``__cupy_get_ndarray__`` (a CuPy protocol)."""

    def __init__(self, a):
        self.a = a

    def __cupy_get_ndarray__(self):
        return self.a


class DummyObjectWithCudaArrayInterface:
    """An object with ``__cuda_array_interface__`` (a device protocol; none on the CPU)."""

    def __init__(self, a):
        self.a = a
