// launch: name=three_nn kernel=three_nn_forward_cuda_kernel grid=32x1 block=512 args=i32:1,i32:16384,i32:512,in:f32:49152:rand,in:f32:1536:rand,out:f32:49152,out:i32:49152
// launch: name=three_nn_squeezed kernel=three_nn_forward_cuda_kernel grid=32x1 block=512 args=i32:1,i32:16384,i32:512,in:f32:49152:rand,in:f32:1536:rand,out:f32:49152,out:i32:49152 maxrregcount=24
// The three nearest of 512 known points for each of 16384 points, one a thread (mmcv's launch:
// GET_BLOCKS(n, 512) x b blocks of 512): the best three kept in registers. No local memory.
// three_nn_squeezed: the same under -maxrregcount=24 (ptxas spills).
//
// Origin: mmcv 2.2.0, Apache License 2.0 (LICENSE.mmcv beside this file): the PyPI sdist mmcv-2.2.0.tar.gz
// (sha256 ac479247e808d8802f89eadf04d4118de86bdfe81361ec5aed0cc1bf731c67c9; upstream
// https://github.com/open-mmlab/mmcv at tag v2.2.0).
// Taken: mmcv/ops/csrc/common/cuda/three_nn_cuda_kernel.cuh (all but its include guard and includes), with the
// CUDA_1D_KERNEL_LOOP macro of common_cuda_helper.hpp in place of its helper include.
// Changed: the __global__ function's `template <typename T>` is `typedef float T;` and `extern "C"` (the
// float instantiation mmcv launches, under a plain symbol); nothing else in its body or the device code.

// Copyright (c) OpenMMLab. All rights reserved

// From mmcv/ops/csrc/common/cuda/common_cuda_helper.hpp:
#define CUDA_1D_KERNEL_LOOP(i, n)                              \
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < (n); \
       i += blockDim.x * gridDim.x)

typedef float T;
extern "C" __global__ void three_nn_forward_cuda_kernel(int b, int n, int m,
                                             const T *unknown, const T *known,
                                             T *dist2, int *__restrict__ idx) {
  // unknown: (B, N, 3)
  // known: (B, M, 3)
  // output:
  //      dist2: (B, N, 3)
  //      idx: (B, N, 3)

  int bs_idx = blockIdx.y;
  CUDA_1D_KERNEL_LOOP(pt_idx, n) {
    if (bs_idx >= b) return;

    unknown += bs_idx * n * 3 + pt_idx * 3;
    known += bs_idx * m * 3;
    dist2 += bs_idx * n * 3 + pt_idx * 3;
    idx += bs_idx * n * 3 + pt_idx * 3;

    T ux = unknown[0];
    T uy = unknown[1];
    T uz = unknown[2];

    double best1 = 1e40, best2 = 1e40, best3 = 1e40;
    int besti1 = 0, besti2 = 0, besti3 = 0;
    for (int k = 0; k < m; ++k) {
      T x = known[k * 3 + 0];
      T y = known[k * 3 + 1];
      T z = known[k * 3 + 2];
      T d = (ux - x) * (ux - x) + (uy - y) * (uy - y) + (uz - z) * (uz - z);
      if (d < best1) {
        best3 = best2;
        besti3 = besti2;
        best2 = best1;
        besti2 = besti1;
        best1 = d;
        besti1 = k;
      } else if (d < best2) {
        best3 = best2;
        besti3 = besti2;
        best2 = d;
        besti2 = k;
      } else if (d < best3) {
        best3 = d;
        besti3 = k;
      }
    }
    dist2[0] = best1;
    dist2[1] = best2;
    dist2[2] = best3;
    idx[0] = besti1;
    idx[1] = besti2;
    idx[2] = besti3;
  }
}
