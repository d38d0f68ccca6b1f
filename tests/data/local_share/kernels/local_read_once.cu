// launch: kernel=local_read_once grid=256 block=1024 args=in:f32:262144,out:f32:262144,i32:262144
// A 64-entry local table filled with constant indices and read once at a run-time index: 64 local stores and
// one local load per thread, no loop, no spill.
extern "C" __global__ void local_read_once(const float* __restrict__ x, float* __restrict__ y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = x[i];
    float table[64];
#pragma unroll
    for (int k = 0; k < 64; ++k) table[k] = x[(i + k * 4099) & (n - 1)] * (float)(k + 1);
    int idx = ((int)(v * 7.0f) + i) & 63;
    y[i] = table[idx];
}
