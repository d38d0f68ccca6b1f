// One wgmma pipeline stage with an assert() between its two wgmmas: ptxas serializes the pipeline (C7510)
// around the call to __assertfail; with -DNDEBUG the call and the note go.
#include <cassert>
extern "C" __global__ void __launch_bounds__(128, 1) wg_assert(float* out, unsigned long long da, unsigned long long db, int k) {
    float d0 = 0.f, d1 = 0.f, d2 = 0.f, d3 = 0.f;
    for (int i = 0; i < k; ++i) {
        asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %6, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%0, %1, %2, %3}, %4, %5, p, 1, 1, 0, 0;\n}\n"
                     : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3) : "l"(da + i), "l"(db + i), "r"(1));
        assert(da != db + i);
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %6, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%0, %1, %2, %3}, %4, %5, p, 1, 1, 0, 0;\n}\n"
                     : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3) : "l"(da + i), "l"(db + i), "r"(1));
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    }
    out[threadIdx.x] = d0 + d1 + d2 + d3;
}
