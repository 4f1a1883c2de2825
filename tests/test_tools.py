"""The measurement tools' arithmetic (CPU): tools/tf32_conv.py's rounding to TF32 and its verdicts."""
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tools"))

from tf32_conv import tf32_round, verdict  # noqa: E402


def test_tf32_round_is_to_nearest_even_on_10_mantissa_bits():
    ulp = 2.0 ** -10
    values = torch.tensor([1.0, 1 + ulp / 2, 1 + 1.5 * ulp, 1 + ulp / 4, 1 + 0.75 * ulp, -(1 + 1.5 * ulp), 3.0e-5])
    expected = torch.tensor([1.0, 1.0, 1 + 2 * ulp, 1.0, 1 + ulp, -(1 + 2 * ulp), 3.0e-5])
    got = tf32_round(values)
    assert torch.equal(got[:6], expected[:6])   # ties to even, below and above half an ulp, negative
    assert abs(got[6].item() - 3.0e-5) <= 3.0e-5 * 2.0 ** -11   # within half an ulp anywhere
    assert torch.equal(tf32_round(got), got)   # already TF32: unchanged


def test_tf32_verdicts_need_one_distance_clearly_smaller():
    # distances seen on an H200 (relative L2 to the exact conv, to the conv of TF32-rounded operands)
    assert verdict(1.5e-7, 2.6e-4) == "fp32"      # a forward cuDNN keeps in fp32
    assert verdict(6.3e-5, 3.2e-4) == "fp32"      # a weight gradient's long fp32 sums, the flag off
    assert verdict(2.4e-4, 7.8e-8) == "TF32"      # problem 60's forward under the flag
    assert verdict(6.7e-4, 5.2e-4) == "unclear"   # a weight gradient under the flag: far from both

