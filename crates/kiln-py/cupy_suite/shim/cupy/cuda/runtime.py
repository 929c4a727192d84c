"""``cupy.cuda.runtime``: the constants CuPy's kernel tests read at import time."""

is_hip = False
cudaChannelFormatKindFloat = 2
cudaResourceTypeArray = 0
cudaAddressModeClamp = 1
cudaFilterModePoint = 0
cudaReadModeElementType = 0
