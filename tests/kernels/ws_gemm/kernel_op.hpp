// The kernel: warpgroup 0 produces with 40 registers (setmaxnreg.dec), warpgroups 1-2 consume with 232.
#pragma once
#include "collective.hpp"

struct GemmKernel {
    __device__ void operator()(const Params& params, float* smem) {
        int wg = threadIdx.x / 128;
        int lane = threadIdx.x % 128;
        if (wg == 0) {
            asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
            Collective::load(params, smem, lane);
        } else {
            asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
            float acc = Collective::mma(params, smem, lane);
            params.out[threadIdx.x] = acc;
        }
    }
};
