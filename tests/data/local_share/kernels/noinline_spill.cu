// launch: kernel=noinline_spill grid=256 block=1024 args=in:f32:262144,out:f32:262144,i32:262144
// The spills live in a __noinline__ device function (its own frame, under the kernel's 32-register cap),
// called 16 times from a rolled loop: the local traffic is in the callee, scaled by the caller's trip count.
#define N 64

__device__ __noinline__ float heavy(const float* __restrict__ x, int i, int t, int n)
{
    float v = x[(i + t * 977) & (n - 1)];
    float acc[N];
#pragma unroll
    for (int k = 0; k < N; ++k) acc[k] = v * (k + 1 + t);
#pragma unroll
    for (int it = 0; it < 4; ++it) {
#pragma unroll
        for (int k = 0; k < N; ++k) acc[k] = fmaf(acc[k], v, acc[(k + 7) & (N - 1)]);
    }
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < N; ++k) s += acc[k] * (k + 1);
    return s;
}

extern "C" __global__ void __launch_bounds__(1024, 2)
noinline_spill(const float* __restrict__ x, float* __restrict__ y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float s = 0.0f;
#pragma unroll 1
    for (int t = 0; t < 16; ++t) s += heavy(x, i, t, n);
    y[i] = s;
}
