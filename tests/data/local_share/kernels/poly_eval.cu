// launch: name=poly_eval_nobounds kernel=poly_eval grid=1024 block=256 args=in:f32:262144,out:f32:262144,i32:262144
// launch: name=poly_eval_1024 kernel=poly_eval grid=256 block=1024 args=in:f32:262144,out:f32:262144,i32:262144 define=BOUNDS=__launch_bounds__(1024)
// launch: name=poly_eval_1024x2 kernel=poly_eval grid=256 block=1024 args=in:f32:262144,out:f32:262144,i32:262144 define=BOUNDS=__launch_bounds__(1024,2)
// Straight-line code: 128 float partial sums, every loop fully unrolled. The launch bounds set the register
// cap (none: up to 255; 1024 threads: 64; 1024 threads x 2 blocks/SM: 32), so the same source spills more
// and more, with no loop around the spill code.
#ifndef BOUNDS
#define BOUNDS
#endif
#define N 128

extern "C" __global__ void BOUNDS poly_eval(const float* __restrict__ x, float* __restrict__ y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = x[i];
    float acc[N];
#pragma unroll
    for (int k = 0; k < N; ++k) acc[k] = v * (k + 1);
#pragma unroll
    for (int it = 0; it < 8; ++it) {
#pragma unroll
        for (int k = 0; k < N; ++k) acc[k] = fmaf(acc[k], v, acc[(k + 7) & (N - 1)]);
    }
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < N; ++k) s += acc[k];
    y[i] = s;
}
