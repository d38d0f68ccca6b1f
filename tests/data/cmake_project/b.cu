// 40 independent accumulators, each live across the whole loop: about 40 registers and more uncapped, so
// -maxrregcount=32 (CMakeLists.txt) changes what ptxas reports.
#define NACC 40

__global__ void many_sums(const float* x, float* out, int n) {
    float acc[NACC];
#pragma unroll
    for (int k = 0; k < NACC; ++k) {
        acc[k] = 0.0f;
    }
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        float v = x[i];
#pragma unroll
        for (int k = 0; k < NACC; ++k) {
            acc[k] = acc[k] * v + (float)(k + 1);
        }
    }
    float total = 0.0f;
#pragma unroll
    for (int k = 0; k < NACC; ++k) {
        total += acc[k] * (float)(k + 1);
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = total;
}
