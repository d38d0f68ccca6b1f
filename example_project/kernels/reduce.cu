// Reductions two ways. block_sum<BLOCK>: a block-wide sum with CUB's BlockReduce, half-precision input and
// cooperative groups (the toolkit headers pytest-regbudget puts on the include path). dot: a grid-stride dot
// product reduced with warp shuffles and one atomicAdd per warp, a streaming kernel that must keep every SM full.
#include <cooperative_groups.h>
#include <cub/block/block_reduce.cuh>
#include <cuda_fp16.h>

namespace cg = cooperative_groups;

template <int BLOCK>
__global__ void __launch_bounds__(BLOCK) block_sum(const __half* __restrict__ in, float* __restrict__ out, int n) {
    using Reduce = cub::BlockReduce<float, BLOCK>;
    __shared__ typename Reduce::TempStorage storage;
    cg::thread_block block = cg::this_thread_block();
    const int i = blockIdx.x * BLOCK + block.thread_rank();
    const float v = i < n ? __half2float(in[i]) : 0.0f;
    const float total = Reduce(storage).Sum(v);
    if (block.thread_rank() == 0) out[blockIdx.x] = total;
}

extern "C" __global__ void dot(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ out,
                               int n) {
    float acc = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) acc = fmaf(x[i], y[i], acc);
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) acc += __shfl_down_sync(0xffffffffu, acc, offset);
    if (threadIdx.x % 32 == 0) atomicAdd(out, acc);
}
