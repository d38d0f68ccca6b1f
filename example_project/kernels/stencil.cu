// Jacobi step of the 2D 5-point Laplacian, out = in + alpha * (N + S + E + W - 4 * C), on an nx x ny grid.
// Shows: a shared-memory tile with a one-cell halo, so each input is read from global memory about once
// (static shared memory: (TX + 2) x (TY + 2) floats, checked by the smem budget), and a 2D block of TX x TY
// threads that must keep the SM full.
#ifndef TX
#define TX 32
#endif
#ifndef TY
#define TY 8
#endif

extern "C" __global__ void __launch_bounds__(TX * TY)
    jacobi5(const float* __restrict__ in, float* __restrict__ out, int nx, int ny, float alpha) {
    __shared__ float tile[TY + 2][TX + 2];
    const int x = blockIdx.x * TX + threadIdx.x;
    const int y = blockIdx.y * TY + threadIdx.y;
    const int lx = threadIdx.x + 1, ly = threadIdx.y + 1;
    // Clamp at the grid's edge: cells outside read their nearest neighbour (a zero-flux boundary).
    auto at = [&](int i, int j) {
        i = min(max(i, 0), nx - 1);
        j = min(max(j, 0), ny - 1);
        return in[j * nx + i];
    };

    tile[ly][lx] = at(x, y);
    if (threadIdx.x == 0) tile[ly][0] = at(x - 1, y);
    if (threadIdx.x == TX - 1) tile[ly][TX + 1] = at(x + 1, y);
    if (threadIdx.y == 0) tile[0][lx] = at(x, y - 1);
    if (threadIdx.y == TY - 1) tile[TY + 1][lx] = at(x, y + 1);
    __syncthreads();

    if (x < nx && y < ny) {
        const float c = tile[ly][lx];
        const float lap = tile[ly - 1][lx] + tile[ly + 1][lx] + tile[ly][lx - 1] + tile[ly][lx + 1] - 4.0f * c;
        out[y * nx + x] = c + alpha * lap;
    }
}
