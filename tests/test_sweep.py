"""run_all.py --sweep's plan (common/sweep.py): which sizes each file is timed at, and its summary."""
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
