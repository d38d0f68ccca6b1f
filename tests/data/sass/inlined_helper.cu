__device__ __forceinline__ float helper(const float* p, int i) {
    return p[i] * p[i + 1] + 1.0f;
}

extern "C" __global__ void hot(const float* x, float* y, int n) {
    float acc = 0.0f;
    for (int i = threadIdx.x; i < n; i += 32) {
        acc += helper(x, i);
    }
    y[threadIdx.x] = acc;
}
