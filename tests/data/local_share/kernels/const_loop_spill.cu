// launch: kernel=const_loop_spill grid=256 block=1024 args=in:f32:262144,out:f32:262144,i32:262144
// Spills inside a loop of constant trip count (64, kept rolled): 64 accumulators live across the loop,
// 32 registers per thread (1024 threads x 2 blocks/SM).
#define N 64

extern "C" __global__ void __launch_bounds__(1024, 2)
const_loop_spill(const float* __restrict__ x, float* __restrict__ y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = x[i];
    float acc[N];
#pragma unroll
    for (int k = 0; k < N; ++k) acc[k] = v * (k + 1);
#pragma unroll 1
    for (int t = 0; t < 64; ++t) {
        float w = x[(i + t * 4099) & (n - 1)];
#pragma unroll
        for (int k = 0; k < N; ++k) acc[k] = fmaf(acc[k], w, acc[(k + 5) & (N - 1)]);
    }
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < N; ++k) s += acc[k] * (k + 1);
    y[i] = s;
}
