// Fault injection: a kernel that stores through an invalid address, so the context
// reports CUDA_ERROR_ILLEGAL_ADDRESS (700, sticky). Only launched on request (tests of
// error surfacing and, later, the service's allow_fault_injection); never by an op.
#if !defined(KILN_ONLY) || defined(KILN_K_fault_illegal_address)
extern "C" __global__ void fault_illegal_address(float* out) {
    volatile float* bad = (volatile float*)(16ull);
    *bad = out[0];
}
#endif
