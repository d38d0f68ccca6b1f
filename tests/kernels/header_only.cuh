// Kernels kept in a header: nvcc compiles a .cuh only when told its language (-x cu).
extern "C" __global__ void header_axpy(float a, const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
