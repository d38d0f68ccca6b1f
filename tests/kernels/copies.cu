// One source loop, three SASS loops: an inlined helper holds the loop and three branches of a switch call
// three instances of it, as DeepGEMM dispatches to three instantiations of its k-loop.
template <int NV>
__device__ __forceinline__ float work(const float* __restrict__ x, int n, int salt) {
    float v[NV];
#pragma unroll
    for (int k = 0; k < NV; ++k) v[k] = x[(k * 131 + salt) & 1023];
    for (int d = 0; d < n; ++d) {
#pragma unroll
        for (int k = 0; k < NV; ++k) v[k] = fmaf(v[k], v[(k + 1) % NV], x[d]);
    }
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < NV; ++k) s += v[k];
    return s;
}

extern "C" __global__ void __launch_bounds__(1024, 2)
copies(const float* __restrict__ x, float* __restrict__ y, int n, int mode) {
    float s;
    switch (mode) {
    case 0: s = work<40>(x, n, 1); break;
    case 1: s = work<44>(x, n, 7); break;
    default: s = work<48>(x, n, 13); break;
    }
    y[threadIdx.x + blockIdx.x * blockDim.x] = s;
}
