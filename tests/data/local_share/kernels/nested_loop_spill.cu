// launch: kernel=nested_loop_spill grid=256 block=1024 args=in:f32:262144,out:f32:262144,i32:262144
// Spills inside two nested loops of constant trip count (8 x 16, both kept rolled).
#define N 64

extern "C" __global__ void __launch_bounds__(1024, 2)
nested_loop_spill(const float* __restrict__ x, float* __restrict__ y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = x[i];
    float acc[N];
#pragma unroll
    for (int k = 0; k < N; ++k) acc[k] = v * (k + 1);
#pragma unroll 1
    for (int a = 0; a < 8; ++a) {
#pragma unroll 1
        for (int b = 0; b < 16; ++b) {
            float w = x[(i + a * 8191 + b * 131) & (n - 1)];
#pragma unroll
            for (int k = 0; k < N; ++k) acc[k] = fmaf(acc[k], w, acc[(k + 3) & (N - 1)]);
        }
#pragma unroll
        for (int k = 0; k < N; k += 2) acc[k] = acc[k] * 0.5f + acc[k + 1];
    }
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < N; ++k) s += acc[k] * (k + 1);
    y[i] = s;
}
