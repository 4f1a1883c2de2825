"""Shared code (CPU): every copy of a block under common/blocks/ in a variant equals its source, every marker names a
source, and every source is used (tools/check_shared.py --check)."""
import re
import subprocess
import sys

import torch

from common.loading import ROOT


def test_shared_blocks_match_their_sources():
    run = subprocess.run([sys.executable, str(ROOT / "tools" / "check_shared.py"), "--check"], capture_output=True,
                         text=True, cwd=ROOT)
    assert run.returncode == 0, run.stdout + run.stderr


def test_the_checker_finds_drift(tmp_path, monkeypatch, capsys):
    """A copy edited by hand fails the check, by file and block (a checker that cannot fail checks nothing)."""
    sys.path.insert(0, str(ROOT / "tools"))
    import check_shared
    for source in (ROOT / "variants").glob("*.py"):
        (tmp_path / source.name).write_text(source.read_text())
    edited = tmp_path / "conv3d_groupnorm_mean.py"
    edited.write_text(edited.read_text().replace("static int dtype_code(", "static int  dtype_code(", 1))
    monkeypatch.setattr(check_shared, "VARIANTS", tmp_path)
    assert check_shared.main(["--check"]) == 1
    assert "variants/conv3d_groupnorm_mean.py: block host differs" in capsys.readouterr().out
    assert check_shared.main(["--write"]) == 0 and check_shared.main(["--check"]) == 0


def test_hardswish_grad_takes_the_running_pytorchs_side_at_the_joins():
    """common/blocks/hardswish_grad.h picks PyTorch's convention at v = -3 and 3 by torch version (open band from
    2.7, closed before): the branch the running torch's headers select gives what its own hardswish_backward gives
    there (the CPU kernel; PyTorch changed its CPU and CUDA kernels together)."""
    text = (ROOT / "common" / "blocks" / "hardswish_grad.h").read_text()
    major, minor = map(int, re.search(r"TORCH_VERSION_MAJOR == (\d+) && TORCH_VERSION_MINOR >= (\d+)", text).groups())
    version = tuple(int(p) for p in re.match(r"(\d+)\.(\d+)", torch.__version__).groups())
    open_band = version >= (major, minor)
    grads = torch.ops.aten.hardswish_backward(torch.ones(2), torch.tensor([-3.0, 3.0])).tolist()
    assert grads == ([0.0, 1.0] if open_band else [-0.5, 1.5]), (torch.__version__, grads)
