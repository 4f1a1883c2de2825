"""Loading a variant file: as a module, and the way benchmark harnesses do (exec of its text)."""
import importlib.util
import os
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
VARIANTS_DIR = ROOT / "variants"
# Builds go to an ignored folder of the repo, so a warm machine never rebuilds an unchanged variant.
os.environ.setdefault("TORCH_EXTENSIONS_DIR", str(ROOT / "build" / "torch_extensions"))
if "CUDA_HOME" not in os.environ and pathlib.Path("/usr/local/cuda").is_dir():
    os.environ["CUDA_HOME"] = "/usr/local/cuda"


def variant_path(name):
    return VARIANTS_DIR / f"{name}.py"


def variant_names():
    return sorted(p.stem for p in VARIANTS_DIR.glob("*.py"))


def import_variant(name):
    """Import variants/<name>.py as a module (its CUDA extension is built or loaded here)."""
    spec = importlib.util.spec_from_file_location(f"variants_{name}", variant_path(name))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def exec_variant(name):
    """Exec the file's text in a fresh namespace with no __file__, as KernelBench-style harnesses do.
    Returns the namespace (a dict holding ModelNew, get_inputs, get_init_inputs)."""
    path = variant_path(name)
    namespace = {"__name__": f"exec_{name}"}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    return namespace
