#include "demo_common.cuh"

// One row per block; torch headers are not needed for the kernel itself.
template <int BLOCK>
__global__ void __launch_bounds__(BLOCK) row_softmax(const float* __restrict__ x, float* __restrict__ y, int n) {
    __shared__ float red[BLOCK / 32];
    const float* row = x + (size_t)blockIdx.x * n;
    float* out = y + (size_t)blockIdx.x * n;
    float m = -INFINITY;
    for (int i = threadIdx.x; i < n; i += BLOCK) m = fmaxf(m, row[i]);
    m = demo_warp_max(m);
    if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = m;
    __syncthreads();
    m = threadIdx.x < BLOCK / 32 ? red[threadIdx.x] : -INFINITY;
    m = demo_warp_max(m);
    float s = 0.f;
    for (int i = threadIdx.x; i < n; i += BLOCK) s += __expf(row[i] - m);
    s = demo_warp_sum(s);
    __syncthreads();
    if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = s;
    __syncthreads();
    s = threadIdx.x < BLOCK / 32 ? red[threadIdx.x] : 0.f;
    s = demo_warp_sum(s);
    for (int i = threadIdx.x; i < n; i += BLOCK) out[i] = __expf(row[i] - m) / s;
}

template __global__ void row_softmax<DEMO_BLOCK>(const float*, float*, int);

void launch_row_softmax(const float* x, float* y, int rows, int n) {
    row_softmax<DEMO_BLOCK><<<rows, DEMO_BLOCK>>>(x, y, n);
}
