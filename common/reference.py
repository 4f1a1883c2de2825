"""The four reference models, as plain PyTorch (KernelBench level 2, problems 23, 27, 60 and 92)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Conv3dGroupNormMean(nn.Module):
    """Problem 23: Conv3d -> GroupNorm -> mean over (C, D, H, W)."""

    def __init__(self, in_channels, out_channels, kernel_size, num_groups):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)
        self.group_norm = nn.GroupNorm(num_groups, out_channels)

    def forward(self, x):
        x = self.conv(x)
        x = self.group_norm(x)
        return x.mean(dim=[1, 2, 3, 4])


class Conv3dHardSwishGroupNormMean(nn.Module):
    """Problem 27: Conv3d -> HardSwish -> GroupNorm -> mean over (D, H, W)."""

    def __init__(self, in_channels, out_channels, kernel_size, num_groups=4, bias=True):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size, bias=bias)
        self.group_norm = nn.GroupNorm(num_groups, out_channels)

    def forward(self, x):
        x = self.conv(x)
        x = F.hardswish(x)
        x = self.group_norm(x)
        return torch.mean(x, dim=[2, 3, 4])


class ConvTranspose3dSwishGroupNormHardSwish(nn.Module):
    """Problem 60: ConvTranspose3d -> Swish -> GroupNorm -> HardSwish."""

    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, groups, eps, bias=True):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding, bias=bias)
        self.group_norm = nn.GroupNorm(num_groups=groups, num_channels=out_channels, eps=eps)

    def forward(self, x):
        x = self.conv_transpose(x)
        x = torch.sigmoid(x) * x
        x = self.group_norm(x)
        return F.hardswish(x)


class Conv2dGroupNormTanhHardSwishResidualAddLogSumExp(nn.Module):
    """Problem 92: Conv2d -> GroupNorm -> Tanh -> HardSwish -> + conv -> logsumexp over C."""

    def __init__(self, in_channels, out_channels, kernel_size, groups, eps=1e-5):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.group_norm = nn.GroupNorm(groups, out_channels, eps=eps)
        self.tanh = nn.Tanh()
        self.hard_swish = nn.Hardswish()

    def forward(self, x):
        x_conv = self.conv(x)
        x_norm = self.group_norm(x_conv)
        x_tanh = self.tanh(x_norm)
        x_hard_swish = self.hard_swish(x_tanh)
        x_res = x_conv + x_hard_swish
        return torch.logsumexp(x_res, dim=1, keepdim=True)
