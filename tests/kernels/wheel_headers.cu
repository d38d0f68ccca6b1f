// Headers that ordinary CUDA programs include, from the nvcc extra's wheels: the runtime's half type, the
// profiler API (nvidia-cuda-profiler-api) and CUB (nvidia-cuda-cccl, which <cuda_fp16.h> needs too).
#include <cuda_fp16.h>
#include <cuda_profiler_api.h>
#include <cub/cub.cuh>

template <int THREADS>
__global__ void half_sum(const __half* in, float* out) {
    using Reduce = cub::BlockReduce<float, THREADS>;
    __shared__ typename Reduce::TempStorage storage;
    float total = Reduce(storage).Sum(__half2float(in[blockIdx.x * THREADS + threadIdx.x]));
    if (threadIdx.x == 0) out[blockIdx.x] = total;
}

int main() {
    cudaProfilerStart();
    half_sum<128><<<1, 128>>>(nullptr, nullptr);
    cudaProfilerStop();
    return 0;
}
