"""Draw a saved channel sweep: python tools/plot_sweep.py SWEEP.json OUT.png

SWEEP.json is what `run_all.py --channels --json SWEEP.json` wrote; the picture is the one `--plot` draws
(x eager per configuration, a line a file, a column of panels per dtype: forward above, forward + backward below).
"""
import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from common.sweep import plot_channel_sweep  # noqa: E402


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    saved = json.loads(pathlib.Path(sys.argv[1]).read_text())
    plot_channel_sweep(saved["sweep"], sys.argv[2], title=saved.get("header", ""))


if __name__ == "__main__":
    main()
