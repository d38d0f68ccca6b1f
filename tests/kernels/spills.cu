// Spill placement for the SASS diagnostics. Both kernels are capped at 32 registers by their launch
// bounds (1024 threads, 2 blocks per SM) and spill; only `hot` spills inside its runtime loop.
#define NV 48

// Every iteration of the runtime loop keeps NV values live: the spills and refills are in the loop.
extern "C" __global__ void __launch_bounds__(1024, 2) hot(const float* __restrict__ x, float* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v[NV];
#pragma unroll
    for (int k = 0; k < NV; ++k) v[k] = x[(i + k * 131) & 1023];
    for (int d = 0; d < n; ++d) {
#pragma unroll
        for (int k = 0; k < NV; ++k) v[k] = fmaf(v[k], v[(k + 1) % NV], x[d]);
    }
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < NV; ++k) s += v[k];
    y[i] = s;
}

// The runtime loop is light; the register-hungry work sits in a branch that rarely runs.
extern "C" __global__ void __launch_bounds__(1024, 2) cold(const float* __restrict__ x, float* __restrict__ y, int n, int flag) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float s = x[i & 1023];
    for (int d = 0; d < n; ++d) s = fmaf(s, 0.5f, x[d]);
    if (flag == 12345) {
        float v[NV];
#pragma unroll
        for (int k = 0; k < NV; ++k) v[k] = x[(i + k * 131) & 1023];
#pragma unroll
        for (int r = 0; r < 4; ++r)
#pragma unroll
            for (int k = 0; k < NV; ++k) v[k] = fmaf(v[k], v[(k + 1) % NV], s);
#pragma unroll
        for (int k = 0; k < NV; ++k) s += v[k];
    }
    y[i] = s;
}
