// d hardswish / dv as the running PyTorch's hardswish_backward takes it at the joins: from torch 2.7 (pull request
// 148049) the band is open (v <= -3 -> 0, v >= 3 -> 1), before it closed (v = -3 -> -0.5, v = 3 -> 1.5); measured:
// torch 2.1.2 closed, 2.11 and 2.14 open. Half values land on -3 and 3 exactly (one in 128 bf16 values near them), so
// a half backward takes PyTorch's side there or a small gradient falls farther from float64 than PyTorch's own.
#include <torch/version.h>
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 7)
__device__ __forceinline__ float hardswish_grad(float v) {
    return v <= -3.f ? 0.f : (v < 3.f ? fmaf(v, 1.f / 3.f, 0.5f) : 1.f);
}
#else
__device__ __forceinline__ float hardswish_grad(float v) {
    return v < -3.f ? 0.f : (v <= 3.f ? fmaf(v, 1.f / 3.f, 0.5f) : 1.f);
}
#endif
