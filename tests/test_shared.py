"""Shared code (CPU): every copy of a block under common/blocks/ in a variant equals its source, every marker names a
source, and every source is used (tools/check_shared.py --check)."""
import subprocess
import sys

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
