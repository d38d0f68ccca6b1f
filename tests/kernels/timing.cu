// A compute-bound kernel whose time grows linearly with ITERS: two dependent FMA chains per thread.
// The GPU tests time ITERS and ITERS * 1.1 to check that a 10 % slowdown is caught.
#ifndef ITERS
#define ITERS 4000
#endif

extern "C" __global__ void spin(float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float a = i * 1e-7f, b = 1.0001f;
    for (int k = 0; k < ITERS; ++k) {
        a = fmaf(a, b, 1e-7f);
        b = fmaf(b, 0.9999f, 1e-6f);
    }
    if (i < n) out[i] = a + b;
}
