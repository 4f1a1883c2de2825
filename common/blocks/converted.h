// t as a contiguous tensor of `dtype`: itself if it is one, else converted by convert_launch (to nearest even):
// the half-precision paths' float copies of their inputs (exact) and their gradients' roundings.
static Tensor converted(const Tensor& t, at::ScalarType dtype) {
    if (!t.defined()) return t;
    auto src = t.contiguous();
    if (src.scalar_type() == dtype) return src;
    auto dst = at::empty(src.sizes(), src.options().dtype(dtype));
    if (src.numel() > 0) {
        const cudaError_t err = convert_launch(src.data_ptr(), dtype_code(src), dst.data_ptr(), dtype_code(dst),
                                               src.numel(), c10::cuda::getCurrentCUDAStream());
        TORCH_CHECK(err == cudaSuccess, "conversion to ", c10::toString(dtype), " failed: ", cudaGetErrorString(err));
    }
    return dst;
}
static OptTensor converted(const OptTensor& t, at::ScalarType dtype) {
    return t.has_value() && t->defined() ? OptTensor(converted(*t, dtype)) : t;
}
