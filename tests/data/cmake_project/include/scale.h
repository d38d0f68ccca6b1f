#pragma once

// CMakeLists.txt defines SCALE=2 (target_compile_definitions); 1 where a file is built without its flags.
#ifndef SCALE
#define SCALE 1
#endif

__device__ __forceinline__ float scaled(float x) { return x * SCALE; }
