// A tensor's elements converted between float32 and a half type (to nearest even): the half-precision paths'
// float copies of their inputs and their gradients' roundings. Dtype codes as with_type's.
template <typename S, typename D>
__global__ void convert_kernel(const S* __restrict__ in, D* __restrict__ out, long long n) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        out[i] = from_float<D>(to_float(in[i]));
}
cudaError_t convert_launch(const void* in, int in_type, void* out, int out_type, long long n, cudaStream_t stream) {
    return with_type(in_type, [&](auto s) {
        return with_type(out_type, [&](auto d) {
            using S = decltype(s);
            using D = decltype(d);
            const int blocks = (int)std::min<long long>((n + 255) / 256, 4096);
            convert_kernel<S, D><<<blocks, 256, 0, stream>>>(static_cast<const S*>(in), static_cast<D*>(out), n);
            return cudaGetLastError();
        });
    });
}
