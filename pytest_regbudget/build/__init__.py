"""Running the tools: toolchain discovery, the compiler (NVRTC, ptxas, nvcc), the Triton and Numba front ends,
prebuilt binaries (cuobjdump), nvdisasm, and the compile cache with its pool. Imports only core/.
"""
