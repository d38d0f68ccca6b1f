// A dot product whose loop over a kernel argument is unrolled UNROLL times: ptxas hoists the loads of each
// unrolled copy ahead of the multiplies, so the registers grow with the factor (tests/integration/
// test_peak_live.py raises it and reads where they go).
#ifndef UNROLL
#define UNROLL 1
#endif

extern "C" __global__ void dot(const float* __restrict__ a, const float* __restrict__ b, float* out, int n)
{
    float s = 0.0f;
#pragma unroll UNROLL
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        s = fmaf(a[i], b[i], s);
    out[threadIdx.x] = s;
}
