#include <torch/extension.h>
#include <torch/version.h>
#include <ATen/autocast_mode.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

// OPS_NAMESPACE comes from the build (-D): the file's name and a hash of its source.
#define OPS_STR_(s) #s
#define OPS_STR(s) OPS_STR_(s)
#define OP(name) OPS_STR(OPS_NAMESPACE) "::" name
#define DEFINE_OPS(ns, m) TORCH_LIBRARY(ns, m)
#define IMPLEMENT_OPS(ns, key, m) TORCH_LIBRARY_IMPL(ns, key, m)

using torch::Tensor;
using OptTensor = c10::optional<Tensor>;
using Mask = std::array<bool, 3>;

// The kernels' dtype codes: float32 0, float16 1, bfloat16 2.
static int dtype_code(const Tensor& t) {
    return t.scalar_type() == at::kHalf ? 1 : t.scalar_type() == at::kBFloat16 ? 2 : 0;
}
static bool takes_dtype(const Tensor& t) {
    return t.scalar_type() == at::kFloat || t.scalar_type() == at::kHalf || t.scalar_type() == at::kBFloat16;
}

// torch.backends.cudnn.allow_tf32 as PyTorch's own convolutions read it, at each call (a CUDA graph keeps
// the value it was captured with). torch 2.9 split the flag by operator and the conv's is the one that counts;
// it is read per operator from 2.11 on, the oldest version this was built and checked with.
static inline bool allow_tf32_conv() {
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 11)
    return at::globalContext().allowTF32CuDNN(at::Float32Op::CONV);
#else
    return at::globalContext().allowTF32CuDNN();
#endif
}

// Whether a file's tensor-core conv gradients take one TF32 product a step: float32 under allow_tf32, as PyTorch's conv
// backward does; bfloat16, whose input and weights are exact in TF32 and whose dL/dy, rounded to TF32, keeps 3 bits
// more than PyTorch's bfloat16 dL/dy (docs/DESIGN.md). Else (float32 with the flag off, float16) split TF32.
inline bool one_tf32_product(const Tensor& x) {
    return x.scalar_type() == at::kBFloat16 || (x.scalar_type() == at::kFloat && allow_tf32_conv());
}

// The dtype torch.autocast runs CUDA operators in (the call was renamed in torch 2.4).
static at::ScalarType autocast_dtype() {
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
    return at::autocast::get_autocast_dtype(at::kCUDA);
#else
    return at::autocast::get_autocast_gpu_dtype();
#endif
}
// t in autocast's dtype where autocast would cast it (a floating tensor other than float64); a
// differentiable cast, so that gradients reach the float32 parameters.
static Tensor autocast_to(const Tensor& t, at::ScalarType dtype) {
    return t.is_floating_point() && t.scalar_type() != at::kDouble && t.scalar_type() != dtype ? t.to(dtype) : t;
}
static OptTensor autocast_to(const OptTensor& t, at::ScalarType dtype) {
    return t.has_value() && t->defined() ? OptTensor(autocast_to(*t, dtype)) : t;
}

// Higher-order gradients are not computed by these operators. Where the backward operator runs with grad
// mode on (inside a backward with create_graph=True) and an input it was given requires grad, its outputs
// come out of DoubleBackwardRefused, whose backward raises: a gradient penalty gets a clear error, never a
// second-order gradient that is silently missing or wrong. A first-order gradient taken with
// create_graph=True still works.
struct DoubleBackwardRefused : torch::autograd::Function<DoubleBackwardRefused> {
    static constexpr int INPUTS = 6;   // the backward operator's tensor inputs that its outputs depend on
    static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const std::string& file,
                                                  const std::vector<Tensor>& grads, const Tensor& a, const Tensor& b,
                                                  const Tensor& c, const Tensor& d, const Tensor& e, const Tensor& f) {
        ctx->saved_data["file"] = file;
        return grads;
    }
    static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                   torch::autograd::variable_list) {
        TORCH_CHECK(false, ctx->saved_data["file"].toStringRef(), ": double backward (a gradient of this file's "
                    "gradients, e.g. a gradient penalty) is not supported");
        return {};
    }
};
static void refuse_double_backward(const char* file, std::vector<Tensor> inputs,
                                   std::initializer_list<Tensor*> outputs) {
    if (!at::GradMode::is_enabled()) return;
    TORCH_CHECK(inputs.size() <= DoubleBackwardRefused::INPUTS, file, ": refuse_double_backward takes at most ",
                DoubleBackwardRefused::INPUTS, " inputs");
    inputs.resize(DoubleBackwardRefused::INPUTS);
    for (auto& t : inputs)   // Function::apply takes defined tensors: a repeat of the first stands for a missing one
        if (!t.defined()) t = inputs[0];
    std::vector<Tensor> grads;
    for (Tensor* t : outputs)
        if (t->defined()) grads.push_back(*t);
    auto wrapped = DoubleBackwardRefused::apply(std::string(file), grads, inputs[0], inputs[1], inputs[2], inputs[3],
                                                inputs[4], inputs[5]);
    size_t i = 0;
    for (Tensor* t : outputs)
        if (t->defined()) *t = wrapped[i++];
}
