// Source of the binaries that tests/tools/test_cuobjdump.py builds with nvcc and reads back with cuobjdump,
// and of the recorded cuobjdump listings in this folder (see README.md). Each kernel gives cuobjdump one
// thing to report; the host function at the end makes the shared library a real host+device one.
#define NV 48

__constant__ float c_scale[64];

// Not inlined: compiled into its callers' sections, and never a kernel of its own.
__device__ __noinline__ float sum_squares(const float* p, int n) {
    float acc = 0.0f;
    for (int i = 0; i < n; ++i) acc += p[i] * p[i];
    return acc;
}

// Launch bounds (256 threads, 2 blocks per SM), static shared memory, a local array on the stack.
extern "C" __global__ void __launch_bounds__(256, 2) bounded(const float* in, float* out, int n) {
    __shared__ float tile[256];
    float local[32];
    int t = threadIdx.x;
    tile[t] = in[blockIdx.x * 256 + t];
    __syncthreads();
    for (int i = 0; i < 32; ++i) local[i] = tile[(t + i * 7) % 256];
    out[blockIdx.x * 256 + t] = local[n & 31] + sum_squares(in, n);
}

// A C++ (mangled) name, no bounds, no shared memory.
__global__ void plain(float* out, int n) { out[threadIdx.x] = n * 2.0f; }

// A template instance with a thread bound only.
template <int N>
__global__ void __launch_bounds__(128) scaled(float* out) {
    out[threadIdx.x] = N * c_scale[threadIdx.x & 63];
}
template __global__ void scaled<4>(float*);

// Dynamic shared memory only: no static bytes, but on sm_90+ still a (reserved) shared section.
extern "C" __global__ void dynamic_only(float* out) {
    extern __shared__ float buffer[];
    buffer[threadIdx.x] = out[threadIdx.x];
    __syncthreads();
    out[threadIdx.x] = buffer[blockDim.x - 1 - threadIdx.x];
}

// A jump table and double constants: a second constant bank (cmem[2]) next to the parameters' bank 0.
extern "C" __global__ void banks(const int* sel, double* out) {
    int s = sel[threadIdx.x];
    double r;
    switch (s) {
        case 0: r = 1.2345678901234; break;
        case 1: r = 2.3456789012345 * out[1]; break;
        case 2: r = 3.4567890123456 + out[2]; break;
        case 3: r = 4.5678901234567 / out[3]; break;
        case 4: r = 5.6789012345678 * out[4] + 0.1; break;
        case 5: r = 6.7890123456789 - out[5]; break;
        case 6: r = 7.8901234567890 * out[6] * out[7]; break;
        case 7: r = 8.9012345678901 + out[8] * 3.3; break;
        default: r = 0.0;
    }
    out[threadIdx.x] = r * c_scale[s & 63];
}

// NV values live across a runtime loop, capped at 32 registers by the bounds: 32-bit spills.
extern "C" __global__ void __launch_bounds__(1024, 2) hot(const float* __restrict__ x, float* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v[NV];
#pragma unroll
    for (int k = 0; k < NV; ++k) v[k] = x[(i + k * 131) & 1023];
    for (int d = 0; d < n; ++d) {
#pragma unroll
        for (int k = 0; k < NV; ++k) v[k] = fmaf(v[k], v[(k + 1) % NV], x[d]);
    }
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < NV; ++k) s += v[k];
    y[i] = s;
}

// The same with doubles: 64-bit spills (STL.64 / LDL.64).
extern "C" __global__ void __launch_bounds__(1024, 2) wide(const double* __restrict__ x, double* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    double v[24];
#pragma unroll
    for (int k = 0; k < 24; ++k) v[k] = x[(i + k * 131) & 1023];
    for (int d = 0; d < n; ++d) {
#pragma unroll
        for (int k = 0; k < 24; ++k) v[k] = fma(v[k], v[(k + 1) % 24], x[d]);
    }
    double s = 0.0;
#pragma unroll
    for (int k = 0; k < 24; ++k) s += v[k];
    y[i] = s;
}

// Spills in a non-inlined callee: ptxas reports them under the callee, not under the kernel.
__device__ __noinline__ float heavy(const float* __restrict__ x, int i, int n) {
    float v[NV];
#pragma unroll
    for (int k = 0; k < NV; ++k) v[k] = x[(i + k * 131) & 1023];
    for (int d = 0; d < n; ++d) {
#pragma unroll
        for (int k = 0; k < NV; ++k) v[k] = fmaf(v[k], v[(k + 1) % NV], x[d]);
    }
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < NV; ++k) s += v[k];
    return s;
}

extern "C" __global__ void __launch_bounds__(1024, 2) calls_heavy(const float* __restrict__ x, float* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    y[i] = heavy(x, i, n) + heavy(x, i + 1, n + 1);
}

#ifndef __CUDACC_RTC__
// Host code for the shared library (no main): NVRTC, which builds device code only, skips it.
void launch_all(const float* in, float* out, int n) {
    bounded<<<1, 256>>>(in, out, n);
    plain<<<1, 32>>>(out, n);
    scaled<4><<<1, 128>>>(out);
    dynamic_only<<<1, 64, 64 * sizeof(float)>>>(out);
}
#endif
