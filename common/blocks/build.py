# PyTorch >= 2.7 can skip prepending torch headers to the .cu file (about 40 s less to build it).
_header_option = ({"no_implicit_headers": True}
                  if "no_implicit_headers" in inspect.signature(load_inline).parameters else {})


def _built(build_root, name):
    """Whether load_inline will find this source already built (its library beside the same sources)."""
    folder = os.path.join(build_root, name)
    def ends_with(file, text):
        path = os.path.join(folder, file)
        if not os.path.exists(path):
            return False
        with open(path) as f:
            return f.read().endswith(text)
    return (os.path.exists(os.path.join(folder, name + ".so")) and ends_with("main.cpp", cpp_source)
            and ends_with("cuda.cu", cuda_source))


def _build(file, name, namespace, extra_cuda_cflags):
    """Loads the operators of cpp_source and cuda_source under `namespace`, building them first where no build
    of this source exists, after one line on stderr saying which."""
    build_root = os.environ.get("TORCH_EXTENSIONS_DIR") or get_default_build_root()
    action = (f"loading its CUDA extension from {build_root}" if _built(build_root, name)
              else f"building its CUDA extension in {build_root} (about 30 s)")
    print(f"{file}: {action}", file=sys.stderr)
    load_inline(name=name, cpp_sources=cpp_source, cuda_sources=cuda_source,
                extra_cflags=[f"-DOPS_NAMESPACE={namespace}"], extra_cuda_cflags=extra_cuda_cflags,
                is_python_module=False, verbose=False, **_header_option)
