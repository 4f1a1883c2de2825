"""Compile: every variant's extension builds and its file execs the way a harness runs it (no GPU
needed); parameters match the reference's exactly."""
import pathlib

import pytest
import torch

from common.loading import variant_names
from common.problems import PROBLEMS, full_names
from tests.conftest import load as namespace, needs_nvcc

pytestmark = needs_nvcc
NAMES = variant_names()


@pytest.mark.parametrize("name", NAMES)
def test_file_execs_and_gives_benchmark_inputs(name):
    ns, problem = namespace(name), PROBLEMS[name]
    assert list(ns["get_init_inputs"]()) == list(problem.init_args)
    inputs = ns["get_inputs"]()
    assert [tuple(t.shape) for t in inputs] == [problem.input_shape]
    assert all(t.dtype == torch.float32 and 0 <= t.min() and t.max() < 1 for t in inputs)


@pytest.mark.parametrize("name", NAMES)
def test_same_seed_gives_identical_parameters(name):
    ns, problem = namespace(name), PROBLEMS[name]
    torch.manual_seed(123)
    ref = problem.model(*problem.init_args)
    torch.manual_seed(123)
    new = ns["ModelNew"](*ns["get_init_inputs"]())
    ref_state, new_state = ref.state_dict(), new.state_dict()
    assert list(new_state) == list(ref_state)
    for key, value in ref_state.items():
        assert torch.equal(new_state[key], value), key


@pytest.mark.parametrize("name", NAMES)
def test_load_state_dict_both_ways(name):
    ns, problem = namespace(name), PROBLEMS[name]
    torch.manual_seed(1)
    ref = problem.model(*problem.init_args)
    torch.manual_seed(2)
    new = ns["ModelNew"](*problem.init_args)
    new.load_state_dict(ref.state_dict())
    assert all(torch.equal(a, b) for a, b in zip(new.state_dict().values(), ref.state_dict().values()))
    torch.manual_seed(3)
    other = ns["ModelNew"](*problem.init_args)
    ref.load_state_dict(other.state_dict())
    assert all(torch.equal(a, b) for a, b in zip(other.state_dict().values(), ref.state_dict().values()))


@pytest.mark.parametrize("name", full_names())   # the concise file prints one line either way
def test_a_built_extension_loads_without_announcing_a_build(name):
    """Once built (this session's load), the file exec-ed in a fresh process says it loads its extension, not
    that it builds one: the build notice comes only when a build will run."""
    import subprocess
    import sys
    namespace(name)
    code = f"from common.loading import load_variant; load_variant({name!r})"
    err = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=str(pathlib.Path(__file__).resolve().parents[1])).stderr
    assert f"{name}: loading its CUDA extension" in err and "building" not in err, err
