// launch: kernel=local_scatter_sort grid=256 block=256 args=in:f32:1048576,out:f32:1048576,i32:65536
// A per-thread insertion sort of 16 values: a local array both read and written at run-time indices in a
// data-dependent loop (local memory, no spill).
extern "C" __global__ void local_scatter_sort(const float* __restrict__ x, float* __restrict__ y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float a[16];
#pragma unroll
    for (int k = 0; k < 16; ++k) a[k] = x[k * n + i] * (float)((k * 7) & 15);
#pragma unroll 1
    for (int k = 1; k < 16; ++k) {
        float key = a[k];
        int j = k - 1;
        while (j >= 0 && a[j] > key) {
            a[j + 1] = a[j];
            --j;
        }
        a[j + 1] = key;
    }
#pragma unroll
    for (int k = 0; k < 16; ++k) y[k * n + i] = a[k];
}
