// A CUTLASS-shaped collective: the producer's k-loop streams tiles, the consumers' mainloop reduces them.
// WINDOW values stay live across the producer's k-loop; at 48 they cannot fit the producer's 40 registers.
// With CHECK_IN_LOOP the k-loop also asserts, and the call to __assertfail is what spills.
#pragma once
#include <cassert>

#ifndef WINDOW
#define WINDOW 48
#endif

struct Params {
    const float* a;
    float* out;
    int k_tiles;
};

struct Collective {
    __device__ static void load(const Params& p, float* smem, int lane) {
        float window[WINDOW];
#pragma unroll
        for (int i = 0; i < WINDOW; ++i) window[i] = p.a[lane + i * 97];
        for (int k = 0; k < p.k_tiles; ++k) {
#pragma unroll
            for (int i = 0; i < WINDOW; ++i) window[i] = fmaf(window[i], p.a[k * 128 + lane + i], window[(i + 7) % WINDOW]);
#ifdef CHECK_IN_LOOP
            assert(window[k % WINDOW] == window[k % WINDOW]);
#endif
            smem[lane + (k % 4) * 128] = window[k % WINDOW];
        }
#pragma unroll
        for (int i = 0; i < WINDOW; ++i) smem[lane + i] += window[i];
    }
    __device__ static float mma(const Params& p, const float* smem, int lane) {
        assert(p.k_tiles > 0);
        float acc = 0.f;
        for (int k = 0; k < p.k_tiles; ++k) acc += smem[(lane + k) % 512] * p.a[k];
        return acc;
    }
};
