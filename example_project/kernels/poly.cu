// Polynomial evaluation with NACC independent accumulators per thread: registers grow with NACC, and
// __launch_bounds__ makes ptxas trade registers for spills. See tests/test_kernels.py for its budgets.
#ifndef NACC
#define NACC 64
#endif
#ifndef BOUNDS
#define BOUNDS
#endif

extern "C" __global__ void BOUNDS poly_eval(const float* __restrict__ x, const float* __restrict__ coef,
                                            float* __restrict__ y, int n, int degree) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v[NACC], acc[NACC];
#pragma unroll
    for (int k = 0; k < NACC; ++k) {
        v[k] = x[(i + k * 977) % n];
        acc[k] = 0.0f;
    }
    for (int d = 0; d < degree; ++d) {
        float c = coef[d];
#pragma unroll
        for (int k = 0; k < NACC; ++k) acc[k] = fmaf(acc[k], v[k], c + k);
    }
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < NACC; ++k) s += acc[k] * acc[(k + 1) % NACC];
    if (i < n) y[i] = s;
}
