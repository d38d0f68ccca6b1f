// launch: kernel=sgemm_squeezed grid=16 block=256 args=in:f32:262144,in:f32:262144,out:f32:262144,i32:512,i32:512,i32:512
// A 128x128-per-block SGEMM tile, 8x8 accumulators per thread, squeezed by __launch_bounds__(256, 8) to 32
// registers: the 64 accumulators spill inside the k loop. C = A * B, A is M x K, B is K x N, all row-major;
// M, N multiples of 128 and K a multiple of 8. The grid is 1-D: (M / 128) * (N / 128) blocks.
#define BM 128
#define BN 128
#define BK 8
#define TM 8
#define TN 8

extern "C" __global__ void __launch_bounds__(256, 8)
sgemm_squeezed(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C, int M, int N, int K)
{
    __shared__ float As[BK][BM];
    __shared__ float Bs[BK][BN];
    int tiles_n = N / BN;
    int bm = blockIdx.x / tiles_n;
    int bn = blockIdx.x % tiles_n;
    int tid = threadIdx.x;
    int tr = tid / (BN / TN);
    int tc = tid % (BN / TN);
    float acc[TM][TN];
#pragma unroll
    for (int r = 0; r < TM; ++r)
#pragma unroll
        for (int c = 0; c < TN; ++c) acc[r][c] = 0.0f;
    for (int k0 = 0; k0 < K; k0 += BK) {
        // 256 threads load 128 x 8 of A and 8 x 128 of B: four elements each.
#pragma unroll
        for (int l = 0; l < 4; ++l) {
            int e = tid + l * 256;
            int ar = e / BK, ac = e % BK;
            As[ac][ar] = A[(bm * BM + ar) * K + k0 + ac];
            int br = e / BN, bc = e % BN;
            Bs[br][bc] = B[(k0 + br) * N + bn * BN + bc];
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < BK; ++kk) {
            float a[TM], b[TN];
#pragma unroll
            for (int r = 0; r < TM; ++r) a[r] = As[kk][tr * TM + r];
#pragma unroll
            for (int c = 0; c < TN; ++c) b[c] = Bs[kk][tc * TN + c];
#pragma unroll
            for (int r = 0; r < TM; ++r)
#pragma unroll
                for (int c = 0; c < TN; ++c) acc[r][c] = fmaf(a[r], b[c], acc[r][c]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int r = 0; r < TM; ++r)
#pragma unroll
        for (int c = 0; c < TN; ++c) C[(bm * BM + tr * TM + r) * N + bn * BN + tc * TN + c] = acc[r][c];
}
