"""Seeded inputs and parameters. Every random draw here comes from its own torch.Generator."""
import copy

import torch
import torch.nn as nn


def make_input(shape, seed, device="cpu"):
    """torch.rand input (uniform [0, 1)), as the benchmark's get_inputs draws it."""
    gen = torch.Generator().manual_seed(seed)
    return torch.rand(shape, generator=gen).to(device)


def perturb_groupnorm(model, seed):
    """Move every GroupNorm off its default affine parameters (weight 1, bias 0).

    At the defaults some outputs are degenerate (problem 23's is exactly 0 for any input), so no
    check is made without this.
    """
    gen = torch.Generator().manual_seed(seed)
    norms = [m for m in model.modules() if isinstance(m, nn.GroupNorm)]
    assert norms, "model has no GroupNorm to perturb"
    with torch.no_grad():
        for m in norms:
            m.weight.copy_(1 + 0.5 * torch.randn(m.weight.shape, generator=gen))
            m.bias.copy_(0.5 * torch.randn(m.bias.shape, generator=gen))
    return model


def make_models(reference_cls, variant_cls, init_args, device, seed=0):
    """Reference and variant built as a benchmark harness does (seed, build on the CPU, move),
    then the reference's GroupNorm perturbed and its parameters copied into the variant."""
    torch.manual_seed(seed)
    ref = reference_cls(*init_args)
    torch.manual_seed(seed)
    new = variant_cls(*init_args)
    perturb_groupnorm(ref, seed + 1)
    new.load_state_dict(ref.state_dict())
    return ref.to(device), new.to(device)


def float64_copy(model):
    return copy.deepcopy(model).double()
