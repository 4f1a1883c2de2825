"""run_all.py --sweep's plan (common/sweep.py): which sizes each file is timed at, and its summary."""
import torch

from common.problems import PROBLEMS
from common.sweep import format_sweep, points, smallest_ratios

def test_every_file_is_swept_at_batch_1_8_and_the_benchmark_and_off_its_tuned_configuration():
    for name, problem in PROBLEMS.items():
        cases = points(name)
        shapes = [c.input_shape for c in cases]
        assert shapes[:3] == [(1,) + problem.input_shape[1:], (8,) + problem.input_shape[1:], problem.input_shape]
        if problem.full:   # the concise file computes the benchmark's configuration only
            assert any(c.init_args != problem.init_args for c in cases), name


def test_previous_sizes_are_swept():
    """KernelBench's previous size (common/problems.py), where a file has one other than its benchmark's, is a point
    of the sweep."""
    for name, problem in PROBLEMS.items():
        if problem.previous and (problem.previous.init_args, problem.previous.input_shape) != (problem.init_args,
                                                                                             problem.input_shape):
            assert problem.previous in points(name)


def test_smallest_ratio_is_the_minimum_over_points():
    rows = [{"name": "a", "point": p, "input_shape": [1], "x_eager_gpu": r, "x_eager": 2 * r}
            for p, r in (("p1", 3.0), ("p2", 0.5), ("p3", 1.0))]
    assert smallest_ratios(rows)["a"]["x_eager_gpu"] == (0.5, "p2")
    assert smallest_ratios(rows)["a"]["x_eager"] == (1.0, "p2")
    assert "0.50 (p2)" in format_sweep(rows)


def test_channel_sweep_covers_the_pairs_kernels_and_batches_and_the_reference_takes_each():
    """run_all.py --channels: every full file at 3 -> 16 ... 64 -> 128 channels, kernel 3 and 5, batch 1, 8 and 32;
    each configuration one the reference accepts (run on the meta device: shapes only)."""
    import torch
    from common.problems import SWEEP_BATCHES, SWEEP_CHANNELS, SWEEP_KERNELS, channel_sweep
    for name, problem in PROBLEMS.items():
        cases = channel_sweep(name)
        if not problem.full:
            assert cases == (), name
            continue
        assert len(cases) == len(SWEEP_CHANNELS) * len(SWEEP_KERNELS) * len(SWEEP_BATCHES), name
        assert {(c.init_args[0], c.init_args[1]) for c in cases} == set(SWEEP_CHANNELS)
        assert {c.input_shape[0] for c in cases} == set(SWEEP_BATCHES)
        for case in cases:
            model = problem.model(*case.init_args).to("meta")
            out = model(torch.empty(case.input_shape, device="meta"))
            assert tuple(out.shape) == problem.out_shape(case.init_args, case.input_shape), (name, case)


def test_plot_draws_a_png(tmp_path):
    from common.sweep import plot_channel_sweep
    rows = [{"name": n, "point": p, "dtype": d, "x_eager_gpu": r, "x_eager_fwd_bwd_gpu": r / 2}
            for n in ("a", "b") for d in ("fp32", "bf16") for p, r in (("3->16 k3 b8", 2.0), ("16->32 k3 b8", 0.5))]
    path = tmp_path / "sweep.png"
    plot_channel_sweep(rows, path, title="test")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_table_header_names_a_changed_tree(monkeypatch):
    """run_all.py's headers keep "-dirty" when they shorten the commit: a run of uncommitted code says so."""
    import run_all
    monkeypatch.setattr(run_all, "git_commit", lambda: "0123456789abcdef0123456789abcdef01234567-dirty")
    assert run_all.short_commit() == "0123456789ab-dirty"
    monkeypatch.setattr(run_all, "git_commit", lambda: "0123456789abcdef0123456789abcdef01234567")
    assert run_all.short_commit() == "0123456789ab"


def test_path_reads_the_plan():
    """A sweep row's path: "torch conv" where the model's plan runs PyTorch's conv in a forward stage, else "fused"
    (a model with no plan: fused)."""
    from common.sweep import path_of

    class Planned:
        def __init__(self, stages):
            self.stages = stages

        def plan(self, x):
            return self.stages
    assert path_of(Planned({"forward conv": "PyTorch's convolution (at::_convolution)", "forward": "k"}), None) == \
        "torch conv"
    assert path_of(Planned({"forward": "conv_gn_stats_kernel", "backward dL/dx": "PyTorch's convolution backward"}),
                   None) == "fused"
    assert path_of(object(), None) == "fused"

    class TrainsOtherwise:   # a plan that follows grad mode, as problem 23's does in half precision
        def plan(self, x):
            conv = "PyTorch's convolution (at::_convolution)" if torch.is_grad_enabled() else "conv_gn_stats_kernel"
            return {"forward conv" if torch.is_grad_enabled() else "forward": conv}
    with torch.no_grad():
        assert path_of(TrainsOtherwise(), None) == "fused, training: torch conv"
