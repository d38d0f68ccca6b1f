/*
 * Oracle for tests/core/test_occupancy.py: runs cudaOccMaxActiveBlocksPerMultiprocessor from the
 * cuda_occupancy.h of the installed CUDA 13 runtime wheel (nvidia-cuda-runtime 13.5, nvidia/cu13/include) on
 * configurations read from stdin. The 13.5 header's virtualResourceCount stays 0 (memset), as the runtime's
 * conversion from cudaFuncAttributes leaves it: no virtual-resource limit.
 *
 * The device description comes from the test (our arch table), so the header is the oracle for the
 * calculation, not for the table. Numbers only, one request per line, one answer per line, so one
 * process answers thousands of configurations.
 *
 * stdin, first line (cudaOccDeviceProp):
 *   major minor maxThreadsPerBlock maxThreadsPerSM regsPerBlock regsPerSM warpSize
 *   sharedMemPerBlock sharedMemPerSM sharedMemPerBlockOptin reservedSharedMemPerBlock
 * stdin, every further line (cudaOccFuncAttributes, cudaOccDeviceState, launch):
 *   numRegs maxThreadsPerBlock sharedSizeBytes shmemLimitConfig maxDynamicSharedSizeBytes
 *   numBlockBarriers carveoutConfig blockSize dynamicSmemSize
 * stdout, one line per request:
 *   status activeBlocks limitingFactors blockLimitRegs blockLimitSharedMem blockLimitWarps
 *   blockLimitBlocks blockLimitBarriers allocatedRegistersPerBlock allocatedSharedMemPerBlock
 */
#include <stdio.h>
#include <string.h>

#include <cuda_occupancy.h>

int main(void)
{
    cudaOccDeviceProp props;
    memset(&props, 0, sizeof props);
    if (scanf("%d %d %d %d %d %d %d %zu %zu %zu %zu",
              &props.computeMajor, &props.computeMinor, &props.maxThreadsPerBlock,
              &props.maxThreadsPerMultiprocessor, &props.regsPerBlock, &props.regsPerMultiprocessor,
              &props.warpSize, &props.sharedMemPerBlock, &props.sharedMemPerMultiprocessor,
              &props.sharedMemPerBlockOptin, &props.reservedSharedMemPerBlock) != 11) {
        fprintf(stderr, "occupancy_oracle: bad device line\n");
        return 2;
    }
    /* Only cudaOccMaxPotentialOccupancyBlockSize reads it, but the input check wants it positive. */
    props.numSms = 1;

    for (;;) {
        cudaOccFuncAttributes attrs;
        cudaOccDeviceState state;
        cudaOccResult result;
        int shmemLimitConfig;
        int blockSize;
        size_t dynamicSmemSize;
        int status;
        int read;

        memset(&attrs, 0, sizeof attrs);
        memset(&state, 0, sizeof state);
        memset(&result, 0, sizeof result);
        read = scanf("%d %d %zu %d %zu %d %d %d %zu",
                     &attrs.numRegs, &attrs.maxThreadsPerBlock, &attrs.sharedSizeBytes, &shmemLimitConfig,
                     &attrs.maxDynamicSharedSizeBytes, &attrs.numBlockBarriers, &state.carveoutConfig,
                     &blockSize, &dynamicSmemSize);
        if (read == EOF) {
            break;
        }
        if (read != 9) {
            fprintf(stderr, "occupancy_oracle: bad request line\n");
            return 2;
        }
        attrs.partitionedGCConfig = PARTITIONED_GC_OFF;
        attrs.shmemLimitConfig = (cudaOccFuncShmemConfig)shmemLimitConfig;
        state.cacheConfig = CACHE_PREFER_NONE;

        status = (int)cudaOccMaxActiveBlocksPerMultiprocessor(&result, &props, &attrs, &state, blockSize,
                                                              dynamicSmemSize);
        printf("%d %d %u %d %d %d %d %d %d %zu\n", status, result.activeBlocksPerMultiprocessor,
               result.limitingFactors, result.blockLimitRegs, result.blockLimitSharedMem,
               result.blockLimitWarps, result.blockLimitBlocks, result.blockLimitBarriers,
               result.allocatedRegistersPerBlock, result.allocatedSharedMemPerBlock);
    }
    return 0;
}
