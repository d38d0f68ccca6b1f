// launch: kernel=no_local grid=256 block=1024 args=in:f32:262144,out:f32:262144,i32:262144
// Control: a small polynomial in registers, no local memory at all (share must be 0).
extern "C" __global__ void no_local(const float* __restrict__ x, float* __restrict__ y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = x[i];
    float s = 0.0f;
#pragma unroll 1
    for (int k = 0; k < 32; ++k) s = fmaf(s, v, (float)(k + 1));
    y[i] = s;
}
