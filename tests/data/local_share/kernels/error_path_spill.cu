// launch: kernel=error_path_spill grid=256 block=1024 args=in:f32:262144,out:f32:262144,i32:262144,i32:0
// The spill code sits only on a path taken when flag == 12345 (an error/debug path); launched with flag = 0,
// so the measured local traffic should be (near) zero although ptxas reports spills.
#define N 128

extern "C" __global__ void __launch_bounds__(1024, 2)
error_path_spill(const float* __restrict__ x, float* __restrict__ y, int n, int flag)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = x[i];
    if (flag == 12345) {
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
        v = s;
    }
    y[i] = v * 2.0f + 1.0f;
}
