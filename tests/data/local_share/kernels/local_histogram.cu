// launch: kernel=local_histogram grid=256 block=256 args=in:i32:4194304,out:i32:1048576,i32:65536
// A 16-bin per-thread histogram: a local array indexed at run time inside a loop (local memory without any
// spill: ptxas reports a stack frame, 0 spill bytes).
extern "C" __global__ void local_histogram(const int* __restrict__ in, int* __restrict__ out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int hist[16];
#pragma unroll
    for (int b = 0; b < 16; ++b) hist[b] = 0;
#pragma unroll 1
    for (int k = 0; k < 64; ++k) {
        int v = in[k * n + i];
        hist[(v * 7 + k) & 15] += 1;
    }
#pragma unroll
    for (int b = 0; b < 16; ++b) out[b * n + i] = hist[b];
}
