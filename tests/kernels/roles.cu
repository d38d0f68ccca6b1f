// Warp-specialized shape: 384 threads, warpgroup 0 the producer (40 registers), 1-2 consumers (232).
extern "C" __global__ void __launch_bounds__(384, 1) roles(float* out, const float* in, int n) {
    int wg = threadIdx.x / 128;
    if (wg == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
        if (threadIdx.x == 0) out[0] = in[0];
    } else {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
        float acc = 0.f;
        for (int i = threadIdx.x; i < n; i += 256) acc += in[i] * in[i];
        out[threadIdx.x] = acc;
    }
}
extern "C" __global__ void dropped(float* out, const float* in, int n) {
    int wg = threadIdx.x / 128;
    if (wg == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
    } else {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
        float acc = 0.f;
        for (int i = threadIdx.x; i < n; i += 256) acc += in[i];
        out[threadIdx.x] = acc;
    }
}
extern "C" __global__ void __launch_bounds__(1024, 2) tooMany(float* out) { out[threadIdx.x] = 1.f; }
