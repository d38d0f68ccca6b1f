// Block-wide sum with CUB and cooperative groups: needs the toolkit headers that pytest-regbudget adds.
#include <cooperative_groups.h>
#include <cub/block/block_reduce.cuh>
#include <cuda_fp16.h>

namespace cg = cooperative_groups;

template <int BLOCK>
__global__ void __launch_bounds__(BLOCK) block_sum(const __half* in, float* out, int n) {
    using Reduce = cub::BlockReduce<float, BLOCK>;
    __shared__ typename Reduce::TempStorage storage;
    cg::thread_block block = cg::this_thread_block();
    int i = blockIdx.x * BLOCK + block.thread_rank();
    float v = i < n ? __half2float(in[i]) : 0.0f;
    float total = Reduce(storage).Sum(v);
    if (block.thread_rank() == 0) out[blockIdx.x] = total;
}

extern "C" __global__ void saxpy(float a, const float* __restrict__ x, float* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
