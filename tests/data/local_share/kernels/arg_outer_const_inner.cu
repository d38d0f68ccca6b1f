// launch: kernel=arg_outer_const_inner grid=256 block=1024 args=in:f32:262144,out:f32:262144,i32:262144,i32:6
// Spills in a constant 8-trip loop nested in a loop over a kernel argument (6 here): 48 trips of the spilling
// body in all, of which a static estimate can only know the inner 8.
#define N 64

extern "C" __global__ void __launch_bounds__(1024, 2)
arg_outer_const_inner(const float* __restrict__ x, float* __restrict__ y, int n, int outer)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = x[i];
    float acc[N];
#pragma unroll
    for (int k = 0; k < N; ++k) acc[k] = v * (k + 1);
    for (int a = 0; a < outer; ++a) {
#pragma unroll 1
        for (int b = 0; b < 8; ++b) {
            float w = x[(i + a * 8191 + b * 131) & (n - 1)];
#pragma unroll
            for (int k = 0; k < N; ++k) acc[k] = fmaf(acc[k], w, acc[(k + 3) & (N - 1)]);
        }
    }
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < N; ++k) s += acc[k] * (k + 1);
    y[i] = s;
}
