"""``cupy.cuda.texture``: texture objects need a GPU and CuPy's runtime; each class raises."""


class _NoTexture:
    def __init__(self, *args, **kwargs):
        raise NotImplementedError("CUDA texture objects are a CuPy runtime feature")


class ChannelFormatDescriptor(_NoTexture):
    """Not available on the CPU path."""


class CUDAarray(_NoTexture):
    """Not available on the CPU path."""


class ResourceDescriptor(_NoTexture):
    """Not available on the CPU path."""


class TextureDescriptor(_NoTexture):
    """Not available on the CPU path."""


class TextureObject(_NoTexture):
    """Not available on the CPU path."""
