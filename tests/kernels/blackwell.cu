// Blackwell's two new resources, for tests/core/test_blackwell.py and tests/integration/test_blackwell.py:
// tensor memory (tcgen05.alloc, sm_100a/sm_103a/sm_110a) and thread block clusters (sm_90 on).
// TMEM_COLS sets the columns the TMEM kernels allocate (a power of 2 from 32 to 512).
#ifndef TMEM_COLS
#define TMEM_COLS 512
#endif
#define STR_(x) #x
#define STR(x) STR_(x)

// Tensor memory is on the datacenter Blackwells' arch-specific targets, not on sm_120 (GeForce) or older.
#if defined(__CUDA_ARCH_FEAT_SM100_ALL) || defined(__CUDA_ARCH_FEAT_SM101_ALL) || \
    defined(__CUDA_ARCH_FEAT_SM103_ALL) || defined(__CUDA_ARCH_FEAT_SM110_ALL) ||   \
    (defined(__CUDA_ARCH_FAMILY_SPECIFIC__) && __CUDA_ARCH_FAMILY_SPECIFIC__ >= 1000 && \
     __CUDA_ARCH_FAMILY_SPECIFIC__ < 1200)
#define HAS_TMEM 1
#endif

__device__ __forceinline__ unsigned smem_addr(const void *p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

#ifdef HAS_TMEM
// Warp 0 allocates, every thread reads the address, warp 0 frees: the shape of CUTLASS's TMEM allocator.
__device__ __forceinline__ void release(unsigned taddr, unsigned ncols) {
    asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;");
    asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, %1;" ::"r"(taddr), "r"(ncols));
}

// The count as an immediate: `tcgen05.alloc... [%r3], 512;`.
extern "C" __global__ void tmem_imm(float *out) {
    __shared__ unsigned slot;
    if (threadIdx.x < 32)
        asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], " STR(TMEM_COLS) ";"
                     ::"r"(smem_addr(&slot)));
    __syncthreads();
    unsigned taddr = slot;
    out[blockIdx.x * blockDim.x + threadIdx.x] = static_cast<float>(taddr);
    __syncthreads();
    if (threadIdx.x < 32) release(taddr, TMEM_COLS);
}

// The count in a register, as CUTLASS's allocator passes it: the PTX sets it first (`mov.b32 %r4, 512;`).
__device__ __forceinline__ void allocate(unsigned *slot, unsigned ncols) {
    asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], %1;"
                 ::"r"(smem_addr(slot)), "r"(ncols));
}

extern "C" __global__ void tmem_reg(float *out) {
    __shared__ unsigned slot;
    if (threadIdx.x < 32) allocate(&slot, TMEM_COLS);
    __syncthreads();
    unsigned taddr = slot;
    out[blockIdx.x * blockDim.x + threadIdx.x] = static_cast<float>(taddr);
    __syncthreads();
    if (threadIdx.x < 32) release(taddr, TMEM_COLS);
}

// Two allocations, 128 + 64 columns: a block holds 192, so 2 blocks hold theirs at once.
extern "C" __global__ void tmem_twice(float *out) {
    __shared__ unsigned slots[2];
    if (threadIdx.x < 32) {
        allocate(&slots[0], 128);
        allocate(&slots[1], 64);
    }
    __syncthreads();
    out[blockIdx.x * blockDim.x + threadIdx.x] = static_cast<float>(slots[0] + slots[1]);
    __syncthreads();
    if (threadIdx.x < 32) {
        asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, 128;" ::"r"(slots[0]));
        release(slots[1], 64);
    }
}

// The count is the kernel's argument: no PTX constant says it, so it is unknown.
extern "C" __global__ void tmem_runtime(float *out, unsigned ncols) {
    __shared__ unsigned slot;
    if (threadIdx.x < 32) allocate(&slot, ncols);
    __syncthreads();
    unsigned taddr = slot;
    out[blockIdx.x * blockDim.x + threadIdx.x] = static_cast<float>(taddr);
    __syncthreads();
    if (threadIdx.x < 32) release(taddr, ncols);
}

// An allocation in a function that is not inlined: a call's count is not summed, so it is unknown.
__device__ __noinline__ void allocate_out_of_line(unsigned *slot) { allocate(slot, TMEM_COLS); }

extern "C" __global__ void tmem_call(float *out) {
    __shared__ unsigned slot;
    if (threadIdx.x < 32) allocate_out_of_line(&slot);
    __syncthreads();
    out[blockIdx.x * blockDim.x + threadIdx.x] = static_cast<float>(slot);
}

// A CTA pair: cta_group::2 allocates the columns in each block of the pair.
extern "C" __global__ void __cluster_dims__(2, 1, 1) tmem_pair(float *out) {
    __shared__ unsigned slot;
    if (threadIdx.x < 32)
        asm volatile("tcgen05.alloc.cta_group::2.sync.aligned.shared::cta.b32 [%0], 256;" ::"r"(smem_addr(&slot)));
    __syncthreads();
    out[blockIdx.x * blockDim.x + threadIdx.x] = static_cast<float>(slot);
}
#endif

#if __CUDA_ARCH__ >= 900  // clusters start with sm_90
// A cluster fixed at compile time: `.explicitcluster` and `.reqnctapercluster 2, 1, 1` in the PTX.
extern "C" __global__ void __cluster_dims__(2, 1, 1) clustered(float *out) {
    out[blockIdx.x * blockDim.x + threadIdx.x] = static_cast<float>(blockIdx.x);
}
#endif

// No cluster at compile time: one may be given at launch (cudaLaunchKernelEx), stated with cluster=.
extern "C" __global__ void unclustered(float *out) {
    out[blockIdx.x * blockDim.x + threadIdx.x] = static_cast<float>(blockIdx.x);
}
