// PyTorch's own convolution, as the module the file replaces runs it (nn.Conv2d, nn.Conv3d, nn.ConvTranspose3d):
// at::_convolution under the user's cuDNN settings (benchmark, deterministic, enabled, allow_tf32 for convs), in the
// input's dtype, on contiguous input (cuDNN's channels-last path takes TF32 where the contiguous one stays fp32), so
// the conv's output is eager's bit for bit. The plan calls it where cuDNN beats the file's fused kernels; it is
// never a fallback for an error.
static Tensor torch_conv(const Tensor& x, const Tensor& weight, const OptTensor& bias, at::IntArrayRef stride,
                         at::IntArrayRef padding, bool transposed, at::IntArrayRef output_padding) {
    const auto& ctx = at::globalContext();
    const std::vector<int64_t> dilation(stride.size(), 1);
    return at::_convolution(x.contiguous(), weight, bias, stride, padding, dilation, transposed, output_padding, 1,
                            ctx.benchmarkCuDNN(), ctx.deterministicCuDNN(), ctx.userEnabledCuDNN(), allow_tf32_conv())
        .contiguous();
}
// Its gradients (dL/dx, dL/dW, dL/dbias where mask asks) from dL/dy, as autograd computes them for that conv:
// at::convolution_backward under the same settings (deterministic only with torch.backends.cudnn.deterministic or
// torch.use_deterministic_algorithms, as eager's).
static std::tuple<Tensor, Tensor, Tensor> torch_conv_backward(const Tensor& grad_y, const Tensor& x,
                                                             const Tensor& weight, at::IntArrayRef stride,
                                                             at::IntArrayRef padding, bool transposed,
                                                             at::IntArrayRef output_padding, std::array<bool, 3> mask) {
    const std::vector<int64_t> dilation(stride.size(), 1);
    const int64_t bias_size = weight.size(transposed ? 1 : 0);
    return at::convolution_backward(grad_y.contiguous(), x.contiguous(), weight, at::IntArrayRef(&bias_size, 1),
                                    stride, padding, dilation, transposed, output_padding, 1, mask);
}
