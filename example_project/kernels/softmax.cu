// Row-wise softmax of a half-precision [rows, cols] matrix, one block of BLOCK threads per row:
// y[r, c] = exp(x[r, c] - max_c x[r, :]) / sum_c exp(x[r, c] - max_c x[r, :]).
// Shows: (1) a templated kernel, measured through a C++ name expression ("softmax<256>"); (2) block
// reductions built from warp shuffles plus one shared-memory slot per warp; (3) registers that grow with an
// unroll factor. Each thread keeps UNROLL values of its row in registers, so the row is read from global
// memory once (rows of up to BLOCK x UNROLL columns: 1,024 for softmax<256>); every extra value costs
// registers for the whole kernel.
// Try: raise the default UNROLL below from 4 to 8 (rows of 2,048) and run pytest: the run goes red.
#include <cuda/std/limits>
#include <cuda_fp16.h>

#ifndef UNROLL
#define UNROLL 4
#endif

// Every thread gets the block's maximum of v.
template <int BLOCK>
__device__ float block_allmax(float v, float* scratch) {
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
    if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
    __syncthreads();
    v = scratch[0];
#pragma unroll
    for (int w = 1; w < BLOCK / 32; ++w) v = fmaxf(v, scratch[w]);
    __syncthreads();  // scratch is reused by the next reduction
    return v;
}

// Every thread gets the block's sum of v.
template <int BLOCK>
__device__ float block_allsum(float v, float* scratch) {
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
    if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
    __syncthreads();
    v = 0.0f;
#pragma unroll
    for (int w = 0; w < BLOCK / 32; ++w) v += scratch[w];
    __syncthreads();
    return v;
}

template <int BLOCK>
__global__ void __launch_bounds__(BLOCK) softmax(const __half* __restrict__ x, __half* __restrict__ y, int cols) {
    static_assert(BLOCK % 32 == 0 && BLOCK <= 1024, "BLOCK must be a multiple of 32, at most 1024");
    constexpr float lowest = -cuda::std::numeric_limits<float>::infinity();
    __shared__ float scratch[BLOCK / 32];
    const __half* row = x + static_cast<size_t>(blockIdx.x) * cols;
    __half* out = y + static_cast<size_t>(blockIdx.x) * cols;

    float v[UNROLL];
    float m = lowest;
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
        const int c = threadIdx.x + u * BLOCK;  // consecutive threads, consecutive columns: coalesced
        v[u] = c < cols ? __half2float(row[c]) : lowest;
        m = fmaxf(m, v[u]);
    }
    m = block_allmax<BLOCK>(m, scratch);

    float s = 0.0f;
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
        v[u] = __expf(v[u] - m);
        s += v[u];
    }
    const float inv = 1.0f / block_allsum<BLOCK>(s, scratch);

#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
        const int c = threadIdx.x + u * BLOCK;
        if (c < cols) out[c] = __float2half(v[u] * inv);
    }
}
