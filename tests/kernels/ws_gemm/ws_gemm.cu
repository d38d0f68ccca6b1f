// The shape of CUTLASS's device_kernel: every collective is inlined into one `op(params, smem)` call.
#include "kernel_op.hpp"

template <class Operator>
__global__ void __launch_bounds__(384, 1) device_kernel(const Params params) {
    extern __shared__ float smem[];
    Operator op;
    op(params, smem);
}

template __global__ void device_kernel<GemmKernel>(const Params);
