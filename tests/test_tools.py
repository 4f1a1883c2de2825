"""The measurement tools' arithmetic (CPU): tools/tf32_conv.py's rounding to TF32."""
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tools"))

from tf32_conv import tf32_round  # noqa: E402


def test_tf32_round_is_to_nearest_even_on_10_mantissa_bits():
    ulp = 2.0 ** -10
    values = torch.tensor([1.0, 1 + ulp / 2, 1 + 1.5 * ulp, 1 + ulp / 4, 1 + 0.75 * ulp, -(1 + 1.5 * ulp), 3.0e-5])
    expected = torch.tensor([1.0, 1.0, 1 + 2 * ulp, 1.0, 1 + ulp, -(1 + 2 * ulp), 3.0e-5])
    got = tf32_round(values)
    assert torch.equal(got[:6], expected[:6])   # ties to even, below and above half an ulp, negative
    assert abs(got[6].item() - 3.0e-5) <= 3.0e-5 * 2.0 ** -11   # within half an ulp anywhere
    assert torch.equal(tf32_round(got), got)   # already TF32: unchanged
