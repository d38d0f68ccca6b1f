// Tiled SGEMM, C = alpha * A * B + beta * C (row-major), with a per-thread register tile.
// Shows: __launch_bounds__ with a minimum of resident blocks. A 256-thread block computes a 128 x 128 tile of C
// from 128 x 8 and 8 x 128 tiles of A and B staged in shared memory (8 KiB); each thread accumulates a TM x TN
// = 8 x 8 sub-tile in registers. Those 64 accumulators plus the A and B fragments need about 120 registers.
// __launch_bounds__(256, 2) asks for two resident blocks per SM, which caps ptxas at 128 registers per thread:
// one register more and the kernel would spill instead of losing a block.
#define BM 128
#define BN 128
#define BK 8
#define TM 8
#define TN 8
#define THREADS ((BM / TM) * (BN / TN))

extern "C" __global__ void __launch_bounds__(THREADS, 2)
    sgemm_tiled(int m, int n, int k, float alpha, const float* __restrict__ a, const float* __restrict__ b,
                float beta, float* __restrict__ c) {
    __shared__ float as[BK][BM];
    __shared__ float bs[BK][BN];

    const int tx = threadIdx.x % (BN / TN);
    const int ty = threadIdx.x / (BN / TN);
    const int row0 = blockIdx.y * BM;
    const int col0 = blockIdx.x * BN;

    float acc[TM][TN] = {};
    for (int k0 = 0; k0 < k; k0 += BK) {
        // 256 threads load a BM x BK tile of A (transposed into shared memory) and a BK x BN tile of B.
        for (int i = threadIdx.x; i < BM * BK; i += THREADS) {
            int r = i / BK, kk = i % BK;
            int gr = row0 + r, gk = k0 + kk;
            as[kk][r] = (gr < m && gk < k) ? a[gr * k + gk] : 0.0f;
        }
        for (int i = threadIdx.x; i < BK * BN; i += THREADS) {
            int kk = i / BN, cc = i % BN;
            int gk = k0 + kk, gc = col0 + cc;
            bs[kk][cc] = (gk < k && gc < n) ? b[gk * n + gc] : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < BK; ++kk) {
            float af[TM], bf[TN];
#pragma unroll
            for (int i = 0; i < TM; ++i) af[i] = as[kk][ty * TM + i];
#pragma unroll
            for (int j = 0; j < TN; ++j) bf[j] = bs[kk][tx * TN + j];
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(af[i], bf[j], acc[i][j]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        int r = row0 + ty * TM + i;
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            int cc = col0 + tx * TN + j;
            if (r < m && cc < n) c[r * n + cc] = alpha * acc[i][j] + beta * c[r * n + cc];
        }
    }
}
