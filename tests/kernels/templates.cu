// A CUDA program with template kernels, as cuda-samples and CUB keep them: nvcc instantiates what main()
// launches, and the plugin names each instance by its readable name ("MatrixMulCUDA<32>").
#include <cstdio>
#include <cuda_runtime.h>

template <int BLOCK_SIZE>
__global__ void MatrixMulCUDA(float* C, float* A, float* B, int wA, int wB) {
    __shared__ float As[BLOCK_SIZE][BLOCK_SIZE];
    __shared__ float Bs[BLOCK_SIZE][BLOCK_SIZE];
    int bx = blockIdx.x, by = blockIdx.y, tx = threadIdx.x, ty = threadIdx.y;
    float sum = 0;
    for (int a = wA * BLOCK_SIZE * by, b = BLOCK_SIZE * bx; a < wA * BLOCK_SIZE * (by + 1);
         a += BLOCK_SIZE, b += BLOCK_SIZE * wB) {
        As[ty][tx] = A[a + wA * ty + tx];
        Bs[ty][tx] = B[b + wB * ty + tx];
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BLOCK_SIZE; ++k) sum += As[ty][k] * Bs[k][tx];
        __syncthreads();
    }
    C[wB * BLOCK_SIZE * by + BLOCK_SIZE * bx + wB * ty + tx] = sum;
}

namespace lib {
struct Foo {
    int n;
    float scale;
};

template <typename Params>
__global__ void Kernel2(Params p, float* out) {
    out[blockIdx.x * blockDim.x + threadIdx.x] = p.scale * p.n;
}
}  // namespace lib

template <typename T, unsigned int BLOCK, bool POW2>
__global__ void reduce6(const T* in, T* out, unsigned int n) {
    __shared__ T partial[BLOCK];
    T sum = 0;
    for (unsigned int i = blockIdx.x * BLOCK + threadIdx.x; i < n; i += BLOCK * gridDim.x) sum += in[i];
    partial[threadIdx.x] = sum;
    __syncthreads();
    for (unsigned int s = POW2 ? BLOCK / 2 : (BLOCK + 1) / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = partial[0];
}

extern "C" __global__ void plain_scale(float* x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= a;
}

int main() {
    float *a = nullptr, *b = nullptr, *c = nullptr;
    const int n = 512;
    cudaMalloc(&a, n * n * sizeof(float));
    cudaMalloc(&b, n * n * sizeof(float));
    cudaMalloc(&c, n * n * sizeof(float));
    MatrixMulCUDA<16><<<dim3(n / 16, n / 16), dim3(16, 16)>>>(c, a, b, n, n);
    MatrixMulCUDA<32><<<dim3(n / 32, n / 32), dim3(32, 32)>>>(c, a, b, n, n);
    lib::Kernel2<lib::Foo><<<n, n>>>(lib::Foo{2, 0.5f}, c);
    reduce6<float, 256, true><<<64, 256>>>(a, b, n * n);
    reduce6<float, 192, false><<<64, 192>>>(a, b, n * n);
    plain_scale<<<n, n>>>(c, 2.0f, n * n);
    cudaDeviceSynchronize();
    std::printf("%s\n", cudaGetErrorString(cudaGetLastError()));
    return 0;
}
