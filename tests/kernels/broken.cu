// Deliberately fails to compile: the tests check that NVRTC's log names this file and line 5.
extern "C" __global__ void broken(float* x) {
    int i = threadIdx.x;
    x[i] = 1.0f;
    undefined_function(x);
}
