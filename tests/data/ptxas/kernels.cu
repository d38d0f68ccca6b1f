// Fixed source for the recorded `ptxas -v` outputs in this folder (see README.md).
// Each kernel exists to make ptxas print one kind of resource line; changing this file
// means re-recording every output and updating the golden table in tests/core/test_ptxas.py.
// No #include: bare NVRTC ships no headers, and the builtins used here need none.

// A `__device__` variable so ptxas reports a "bytes gmem" line for the module.
__device__ unsigned int g_counter;

// User constants land in their own cmem bank, next to the kernel-parameter bank.
__constant__ float c_coeffs[64];

// The plainest kernel: unmangled name, a few registers, no smem/stack/spills.
extern "C" __global__ void simple_add(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        c[i] = a[i] + b[i];
    }
}

// Keeps N values live at once: fine in registers, spilled once registers are capped below ~N.
template <int N>
__device__ __forceinline__ void mix(const float* __restrict__ in, float* __restrict__ out, int stride) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    float v[N];
#pragma unroll
    for (int i = 0; i < N; ++i) {
        v[i] = in[t + i * stride];
    }
#pragma unroll
    for (int r = 0; r < 4; ++r) {
#pragma unroll
        for (int i = 0; i < N; ++i) {
            v[i] = v[i] * v[(i + 1) % N] + v[(i + 7) % N];
        }
    }
#pragma unroll
    for (int i = 0; i < N; ++i) {
        out[t + i * stride] = v[i];
    }
}

// __launch_bounds__(1024, 2) caps registers at 65536 / (1024 * 2) = 32, so ptxas must spill even
// without -maxrregcount (sm_75 holds only 1024 threads per SM, so there ptxas ignores the 2).
extern "C" __global__ void __launch_bounds__(1024, 2)
    spill_heavy(const float* __restrict__ in, float* __restrict__ out, int stride) {
    mix<48>(in, out, stride);
}

// No bounds: fits in registers by default and spills only in the -maxrregcount=32 recordings.
extern "C" __global__ void pressure(const float* __restrict__ in, float* __restrict__ out, int stride) {
    mix<40>(in, out, stride);
}

// A local array written and read at data-dependent indices cannot live in registers (nor be
// folded away by the optimizer): it becomes a stack frame without any spilling.
extern "C" __global__ void stack_frame(const float* in, const int* idx, float* out) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    float hist[64];
    for (int i = 0; i < 64; ++i) {
        hist[i] = 0.0f;
    }
    for (int i = 0; i < 64; ++i) {
        hist[idx[t * 64 + i] & 63] += in[t * 64 + i];
    }
    out[t] = hist[idx[t] & 63];
}

// Static shared memory plus __syncthreads (one barrier).
extern "C" __global__ void shared_reverse(float* data) {
    __shared__ float tile[256];
    int t = threadIdx.x;
    tile[t] = data[blockIdx.x * 256 + t];
    __syncthreads();
    data[blockIdx.x * 256 + t] = tile[255 - t];
}

// A named barrier (id 1) on top of barrier 0, so ptxas counts two barriers.
extern "C" __global__ void named_barrier(float* data) {
    __shared__ float tile[128];
    int t = threadIdx.x;
    tile[t] = data[t];
    __syncthreads();
    asm volatile("bar.sync 1, 64;");
    data[t] = tile[127 - t] + 1.0f;
}

// Reads the __constant__ array and bumps the __device__ counter.
extern "C" __global__ void poly_eval(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float acc = 0.0f;
        float xi = x[i];
        for (int k = 63; k >= 0; --k) {
            acc = acc * xi + c_coeffs[k];
        }
        y[i] = acc;
        atomicAdd(&g_counter, 1u);
    }
}

// A template kernel: only reachable through a name expression, printed mangled by ptxas.
template <typename T, int N>
__global__ void scale(T* x, T a) {
    int i = (blockIdx.x * blockDim.x + threadIdx.x) * N;
#pragma unroll
    for (int k = 0; k < N; ++k) {
        x[i + k] *= a;
    }
}

// __launch_bounds__(256, 2) -> `.maxntid 256, 1, 1` and `.minnctapersm 2` in the PTX.
extern "C" __global__ void __launch_bounds__(256, 2) bounded(float* x) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    x[i] = x[i] * 2.0f + 1.0f;
}

// __maxnreg__ (CUDA 12.4+) -> `.maxnreg 40` in the PTX; older toolkits compile the plain kernel
// so every recording has the same set of entries.
#if defined(__CUDACC_VER_MAJOR__) && \
    (__CUDACC_VER_MAJOR__ > 12 || (__CUDACC_VER_MAJOR__ == 12 && __CUDACC_VER_MINOR__ >= 4))
#define REGBUDGET_MAXNREG(n) __maxnreg__(n)
#else
#define REGBUDGET_MAXNREG(n)
#endif
extern "C" __global__ void REGBUDGET_MAXNREG(40) capped_regs(float* x) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    x[i] = x[i] * x[i] + 3.0f;
}

// A non-inlined device function with its own stack frame: ptxas prints "Function properties"
// for it, but it is not an entry and must not be reported as a kernel.
__device__ __noinline__ float helper(const float* p, int k) {
    float tmp[16];
    for (int i = 0; i < 16; ++i) {
        tmp[i] = p[i] * (float)i;
    }
    return tmp[k & 15];
}

extern "C" __global__ void calls_helper(const float* p, const int* k, float* out) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    out[t] = helper(p + t * 16, k[t]);
}
