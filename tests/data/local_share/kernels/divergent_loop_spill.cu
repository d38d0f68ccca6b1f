// launch: kernel=divergent_loop_spill grid=256 block=1024 args=in:f32:262144,out:f32:262144,i32:262144
// Spills in a 32-trip constant loop that only a quarter of each warp's lanes enter (lane % 4 == 0): every
// warp still issues the spill instructions (the share counts warp instructions), with 8 of 32 lanes active.
#define N 64

extern "C" __global__ void __launch_bounds__(1024, 2)
divergent_loop_spill(const float* __restrict__ x, float* __restrict__ y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = x[i];
    if ((threadIdx.x & 3) == 0) {
        float acc[N];
#pragma unroll
        for (int k = 0; k < N; ++k) acc[k] = v * (k + 1);
#pragma unroll 1
        for (int t = 0; t < 32; ++t) {
            float w = x[(i + t * 4099) & (n - 1)];
#pragma unroll
            for (int k = 0; k < N; ++k) acc[k] = fmaf(acc[k], w, acc[(k + 5) & (N - 1)]);
        }
        float s = 0.0f;
#pragma unroll
        for (int k = 0; k < N; ++k) s += acc[k] * (k + 1);
        v = s;
    }
    y[i] = v;
}
