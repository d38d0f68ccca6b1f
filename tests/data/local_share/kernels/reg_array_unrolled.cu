// launch: kernel=reg_array_unrolled grid=256 block=1024 args=in:f32:262144,out:f32:262144,i32:262144
// Control: a per-thread array indexed only by unrolled (constant) indices stays in registers: no local memory.
#define N 16

extern "C" __global__ void reg_array_unrolled(const float* __restrict__ x, float* __restrict__ y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = x[i];
    float acc[N];
#pragma unroll
    for (int k = 0; k < N; ++k) acc[k] = v + k;
#pragma unroll 1
    for (int t = 0; t < 16; ++t) {
#pragma unroll
        for (int k = 0; k < N; ++k) acc[k] = fmaf(acc[k], v, acc[(k + 1) & (N - 1)]);
    }
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < N; ++k) s += acc[k];
    y[i] = s;
}
