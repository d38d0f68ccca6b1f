// launch: name=nms kernel=nms_cuda grid=64x64 block=64 args=i32:4096,f32:0.5,i32:0,in:f32:16384:rand,out:i32:524288
// Non-maximum suppression's overlap mask for 4096 boxes (x1, y1, x2, y2), 64 boxes a block against 64
// others staged in shared memory (mmcv's launch: col_blocks x col_blocks blocks of 64), a bit mask of
// unsigned long long a thread (the out buffer: 4096 x 64 of them, as twice as many ints). No local memory.
//
// Origin: mmcv 2.2.0, Apache License 2.0 (LICENSE.mmcv beside this file): the PyPI sdist mmcv-2.2.0.tar.gz
// (sha256 ac479247e808d8802f89eadf04d4118de86bdfe81361ec5aed0cc1bf731c67c9; upstream
// https://github.com/open-mmlab/mmcv at tag v2.2.0).
// Taken: mmcv/ops/csrc/common/cuda/nms_cuda_kernel.cuh: threadsPerBlock, devIoU and nms_cuda, verbatim, with the
// CUDA_2D_KERNEL_BLOCK_LOOP macro of common_cuda_helper.hpp in place of its helper include.
// Changed: nms_cuda's `static` is `extern "C"` (a symbol to launch).

// Copyright (c) OpenMMLab. All rights reserved

// From mmcv/ops/csrc/common/cuda/common_cuda_helper.hpp:
#define CUDA_2D_KERNEL_BLOCK_LOOP(i, n, j, m)          \
  for (size_t i = blockIdx.x; i < (n); i += gridDim.x) \
    for (size_t j = blockIdx.y; j < (m); j += gridDim.y)

int const threadsPerBlock = sizeof(unsigned long long int) * 8;

__device__ inline bool devIoU(float const *const a, float const *const b,
                              const int offset, const float threshold) {
  float left = fmaxf(a[0], b[0]), right = fminf(a[2], b[2]);
  float top = fmaxf(a[1], b[1]), bottom = fminf(a[3], b[3]);
  float width = fmaxf(right - left + offset, 0.f),
        height = fmaxf(bottom - top + offset, 0.f);
  float interS = width * height;
  float Sa = (a[2] - a[0] + offset) * (a[3] - a[1] + offset);
  float Sb = (b[2] - b[0] + offset) * (b[3] - b[1] + offset);
  return interS > threshold * (Sa + Sb - interS);
}

extern "C" __global__ void nms_cuda(const int n_boxes, const float iou_threshold,
                                const int offset, const float *dev_boxes,
                                unsigned long long *dev_mask) {
  int blocks = (n_boxes + threadsPerBlock - 1) / threadsPerBlock;
  CUDA_2D_KERNEL_BLOCK_LOOP(col_start, blocks, row_start, blocks) {
    const int tid = threadIdx.x;

    if (row_start > col_start) return;

    const int row_size =
        fminf(n_boxes - row_start * threadsPerBlock, threadsPerBlock);
    const int col_size =
        fminf(n_boxes - col_start * threadsPerBlock, threadsPerBlock);

    __shared__ float block_boxes[threadsPerBlock * 4];
    if (tid < col_size) {
      block_boxes[tid * 4 + 0] =
          dev_boxes[(threadsPerBlock * col_start + tid) * 4 + 0];
      block_boxes[tid * 4 + 1] =
          dev_boxes[(threadsPerBlock * col_start + tid) * 4 + 1];
      block_boxes[tid * 4 + 2] =
          dev_boxes[(threadsPerBlock * col_start + tid) * 4 + 2];
      block_boxes[tid * 4 + 3] =
          dev_boxes[(threadsPerBlock * col_start + tid) * 4 + 3];
    }
    __syncthreads();

    if (tid < row_size) {
      const int cur_box_idx = threadsPerBlock * row_start + tid;
      const float *cur_box = dev_boxes + cur_box_idx * 4;
      int i = 0;
      unsigned long long int t = 0;
      int start = 0;
      if (row_start == col_start) {
        start = tid + 1;
      }
      for (i = start; i < col_size; i++) {
        if (devIoU(cur_box, block_boxes + i * 4, offset, iou_threshold)) {
          t |= 1ULL << i;
        }
      }
      dev_mask[cur_box_idx * gridDim.y + col_start] = t;
    }
  }
}
