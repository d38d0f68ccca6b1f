// Kernels whose spills are in the __noinline__ functions they call (issue 43): ptxas reports those under the
// function, not the kernel. `only_callee` spills nothing of its own: its spills are all in `heavy_into` and
// the `heavy` it calls. `first` and `second` share `heavy` (a whole-program build compiles a copy into each,
// with figures of its own); `second` also reaches it through `middle`; `light` does not spill; `fact` and
// `even`/`odd` recurse.
#define N 32
// A relocatable build (-rdc=true) compiles each function apart, where a callee may not need more registers
// than the launch bounds give the kernel: it is built without them (-DBOUNDS=) and -maxrregcount=32.
#ifndef BOUNDS
#define BOUNDS __launch_bounds__(1024, 2)
#endif

__device__ __noinline__ float heavy(const float* __restrict__ x, int i, int t, int n)
{
    float v = x[(i + t * 977) & (n - 1)];
    float acc[N];
#pragma unroll
    for (int k = 0; k < N; ++k) acc[k] = v * (k + 1 + t);
#pragma unroll
    for (int it = 0; it < 4; ++it) {
#pragma unroll
        for (int k = 0; k < N; ++k) acc[k] = fmaf(acc[k], v, acc[(k + 7) % N]);
    }
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < N; ++k) s += acc[k] * (k + 1);
    return s;
}

__device__ __noinline__ void heavy_into(const float* __restrict__ x, float* __restrict__ y, int i, int n)
{
    y[i] = heavy(x, i, 1, n);
}

__device__ __noinline__ float light(const float* x, int i) { return x[i] * 2.0f; }

__device__ __noinline__ float middle(const float* x, int i, int t, int n)
{
    return heavy(x, i, t, n) + light(x, i);
}

__device__ __noinline__ int fact(int n) { return n <= 1 ? 1 : n * fact(n - 1); }

__device__ __noinline__ int odd(int n);
__device__ __noinline__ int even(int n) { return n == 0 ? 1 : odd(n - 1); }
__device__ __noinline__ int odd(int n) { return n == 0 ? 0 : even(n - 1); }

// Nothing of its own is live across the call, so ptxas spills nothing under the kernel's name.
extern "C" __global__ void BOUNDS
only_callee(const float* __restrict__ x, float* __restrict__ y, int n)
{
    heavy_into(x, y, blockIdx.x * blockDim.x + threadIdx.x, n);
}

extern "C" __global__ void BOUNDS
first(const float* __restrict__ x, float* __restrict__ y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float s = 0.0f;
#pragma unroll 1
    for (int t = 0; t < 16; ++t) s += heavy(x, i, t, n);
    y[i] = s;
}

extern "C" __global__ void BOUNDS
second(const float* __restrict__ x, float* __restrict__ y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    y[i] = middle(x, i, 3, n) + heavy(x, i, 5, n);
}

extern "C" __global__ void calls_light(const float* x, float* y) { y[threadIdx.x] = light(x, threadIdx.x); }

extern "C" __global__ void recursive(int* y) { y[threadIdx.x] = fact(threadIdx.x) + even(threadIdx.x); }
