// A whole CUDA program, as most projects keep them: host code, runtime API calls and kernels in one file.
// NVRTC cannot compile it; compiler="nvcc" can.
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cuda_runtime.h>

#define CHECK(call)                                                                   \
    do {                                                                              \
        cudaError_t err_ = (call);                                                    \
        if (err_ != cudaSuccess) {                                                    \
            std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(err_)); \
            std::exit(1);                                                             \
        }                                                                             \
    } while (0)

template <int TILE>
__global__ void __launch_bounds__(TILE * TILE) transpose(const float* in, float* out, int n) {
    __shared__ float tile[TILE][TILE + 1];
    int x = blockIdx.x * TILE + threadIdx.x, y = blockIdx.y * TILE + threadIdx.y;
    if (x < n && y < n) tile[threadIdx.y][threadIdx.x] = in[y * n + x];
    __syncthreads();
    x = blockIdx.y * TILE + threadIdx.x;
    y = blockIdx.x * TILE + threadIdx.y;
    if (x < n && y < n) out[y * n + x] = tile[threadIdx.x][threadIdx.y];
}

extern "C" __global__ void scale(float* data, float factor, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) data[i] *= factor;
}

template __global__ void transpose<32>(const float*, float*, int);

int main() {
    const int n = 1024;
    std::vector<float> host(n * n, 1.0f);
    float *in = nullptr, *out = nullptr;
    CHECK(cudaMalloc(&in, n * n * sizeof(float)));
    CHECK(cudaMalloc(&out, n * n * sizeof(float)));
    CHECK(cudaMemcpy(in, host.data(), n * n * sizeof(float), cudaMemcpyHostToDevice));
    transpose<32><<<dim3(n / 32, n / 32), dim3(32, 32)>>>(in, out, n);
    scale<<<(n * n + 255) / 256, 256>>>(out, 2.0f, n * n);
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaMemcpy(host.data(), out, n * n * sizeof(float), cudaMemcpyDeviceToHost));
    std::printf("%f\n", host[0]);
    CHECK(cudaFree(in));
    CHECK(cudaFree(out));
    return 0;
}
