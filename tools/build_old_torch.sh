#!/usr/bin/env bash
# Builds every variant's extension against an old torch (default 2.1.2, whose PyPI wheels are CUDA 12.1) in
# a throwaway venv, then runs the CPU tests that build, load and trace them (tests/test_compile.py,
# tests/test_operators.py) under that torch. No GPU needed.
#
#   tools/build_old_torch.sh [TORCH_VERSION]                       (default: 2.1.2)
#
# The CUDA compiler is the machine's, under $CUDA_HOME (default /usr/local/cuda): ideally a 12.x toolkit
# for torch 2.1.2. torch's JIT builds do not compare the toolkit's major version with torch's, so a 13.x
# toolkit builds too (torch's C++ API, the part that changes between versions, is 2.1.2's either way);
# PyPI's nvidia-cuda-nvcc-cu12 wheels carry ptxas but no nvcc, so they cannot stand in for a toolkit.
# Needs python3.11 and PyPI; downloads about 2.5 GB into $OLD_TORCH_DIR (default /tmp/old_torch_<version>).
# Prints pytest's line for each variant and test, and exits non-zero if any failed.
set -euo pipefail
TORCH_VERSION=${1:-2.1.2}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=${OLD_TORCH_DIR:-/tmp/old_torch_$TORCH_VERSION}
VENV=$WORK/venv

echo "== torch $TORCH_VERSION in $WORK (a first run downloads about 2.5 GB), CUDA_HOME $CUDA_HOME"
if [ ! -x "$VENV/bin/python" ]; then
    python3.11 -m venv "$VENV"
fi
"$VENV/bin/pip" install -q --disable-pip-version-check "torch==$TORCH_VERSION" "numpy<2" ninja pytest
"$CUDA_HOME/bin/nvcc" --version | tail -2

cd "$ROOT"
# the extensions load (their operators register) with no GPU; they link the toolkit's libcudart
export CUDA_HOME TORCH_CUDA_ARCH_LIST="8.0;9.0" TORCH_EXTENSIONS_DIR="$WORK/torch_extensions"
export LD_LIBRARY_PATH="$CUDA_HOME/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
"$VENV/bin/python" -c "import torch; print('torch', torch.__version__, 'CUDA', torch.version.cuda)"
"$VENV/bin/python" -m pytest -p no:cacheprovider -q -rA tests/test_compile.py tests/test_operators.py 2>&1 \
    | grep -E "^(PASSED|FAILED|ERROR)|passed|failed|error" 
