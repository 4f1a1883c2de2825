// dL/dW: each weight's split totals added in order.
__global__ void finish_weight_grad_tiled_kernel(const double* __restrict__ partials, float* __restrict__ grad_weight,
                                                long long n, int splits)
{
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= n) return;
    double v = 0.0;
    for (int s = 0; s < splits; ++s) v += partials[(size_t)s * n + i];
    grad_weight[i] = (float)v;
}
