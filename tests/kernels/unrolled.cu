// A dot product whose loop over a kernel argument is unrolled UNROLL times: ptxas hoists the loads of each
// unrolled copy ahead of the multiplies, so the registers grow with the factor (tests/integration/
// test_peak_live.py raises it and reads where they go).
#ifndef UNROLL
#define UNROLL 1
#endif
// nvcc does not expand macros in a pragma's argument (NVRTC does): _Pragma takes the expanded text.
#define PRAGMA(text) _Pragma(#text)
#define UNROLL_BY(n) PRAGMA(unroll n)

extern "C" __global__ void dot(const float* __restrict__ a, const float* __restrict__ b, float* out, int n)
{
    float s = 0.0f;
    UNROLL_BY(UNROLL)
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        s = fmaf(a[i], b[i], s);
    out[threadIdx.x] = s;
}
