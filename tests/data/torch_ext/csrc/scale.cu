#include <cuda_fp16.h>

__global__ void scale_half(const __half* __restrict__ x, __half* __restrict__ y, float alpha, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = __float2half(__half2float(x[i]) * alpha);
}

__global__ void scale_float4(const float4* __restrict__ x, float4* __restrict__ y, float alpha, int n4) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n4) {
        float4 v = x[i];
        y[i] = make_float4(v.x * alpha, v.y * alpha, v.z * alpha, v.w * alpha);
    }
}

void launch_scale_half(const void* x, void* y, float alpha, int n) {
    scale_half<<<(n + 255) / 256, 256>>>(static_cast<const __half*>(x), static_cast<__half*>(y), alpha, n);
}
