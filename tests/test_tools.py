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



def test_gpu_tools_say_plainly_that_they_need_a_gpu(tmp_path):
    """With no GPU visible, each measuring tool exits non-zero with one plain line, not a traceback; profile_one.py
    with no name prints its usage."""
    import os
    import subprocess
    root = pathlib.Path(__file__).resolve().parents[1]
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    runs = {"half_rounding.py": [], "compiled_call_time.py": ["--names"], "interleave.py": ["x", "y"],
            "profile_one.py": ["conv3d_groupnorm_mean"]}
    for tool, args in runs.items():
        done = subprocess.run([sys.executable, str(root / "tools" / tool), *args], env=env, cwd=tmp_path,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode != 0 and "needs a CUDA GPU" in done.stderr and "Traceback" not in done.stderr, (
            tool, done.stderr[-500:])
    usage = subprocess.run([sys.executable, str(root / "tools" / "profile_one.py")], env=env, cwd=tmp_path,
                           capture_output=True, text=True, timeout=120)
    assert usage.returncode != 0 and "python tools/profile_one.py NAME" in usage.stderr


def test_a_cuda_toolkit_is_there_to_build_with():
    """Without nvcc every compile test would skip, and a run of skips is no pass: this one fails and says why."""
    from tests.conftest import HAS_NVCC
    assert HAS_NVCC, ("no CUDA toolkit found: set CUDA_HOME to one (or install it under /usr/local/cuda) whose major "
                      f"version matches torch's CUDA ({torch.version.cuda}); torch must be a CUDA build. Without it "
                      "no file can be built, so nothing here was checked")


def test_kernelbench_check_takes_other_sizes_of_the_same_model_only(tmp_path):
    """With references from elsewhere (an older KernelBench), a problem whose file there names another model (problem
    27 before July 2025) is skipped and said so, not run against that model."""
    import kernelbench_check
    for folder, files in (("now", ("23_Conv3d_GroupNorm_Mean.py", "27_Conv3d_HardSwish_GroupNorm_Mean.py")),
                          ("then", ("23_Conv3d_GroupNorm_Mean.py", "27_Conv3d_HardSwish_ReLU_Softmax_Mean.py"))):
        level2 = tmp_path / folder / "KernelBench" / "level2"
        level2.mkdir(parents=True)
        for name in files:
            (level2 / name).write_text("batch_size = 1\n")
    said = []
    kept = kernelbench_check.same_model(["conv3d_groupnorm_mean", "conv3d_hardswish_groupnorm_mean"],
                                        tmp_path / "now", references=tmp_path / "then" / "KernelBench" / "level2",
                                        log=said.append)
    assert kept == ["conv3d_groupnorm_mean"]
    assert len(said) == 1 and "27_Conv3d_HardSwish_ReLU_Softmax_Mean.py" in said[0]
