// launch: kernel=spill_then_loop grid=256 block=1024 args=in:f32:262144,out:f32:262144,i32:262144
// Straight-line spills (the poly_eval body under a 32-register cap) followed by a long rolled loop (512
// trips) with few live values and no spill: most executed instructions are the loop's, so the measured share
// is small although the spill code is long.
#define N 128

extern "C" __global__ void __launch_bounds__(1024, 2)
spill_then_loop(const float* __restrict__ x, float* __restrict__ y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = x[i];
    float acc[N];
#pragma unroll
    for (int k = 0; k < N; ++k) acc[k] = v * (k + 1);
#pragma unroll
    for (int it = 0; it < 3; ++it) {
#pragma unroll
        for (int k = 0; k < N; ++k) acc[k] = fmaf(acc[k], v, acc[(k + 7) & (N - 1)]);
    }
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < N; ++k) s += acc[k];
    float u = v;
#pragma unroll 1
    for (int t = 0; t < 512; ++t) {
        s = fmaf(s, 0.999f, u);
        u = fmaf(u, 1.0001f, (float)t * 1e-6f);
    }
    y[i] = s + u;
}
