"""Code the variant files share, kept in one place.

Each variant stands alone (a harness execs its text), so a helper that several files need is written into each
of them. Its one source is a file under common/blocks/ (NAME.h for C++ and CUDA, NAME.py for Python); a variant
holds a copy between two marker lines, inside its CUDA/C++ strings or in its Python:

    // shared: NAME begin          # shared: NAME begin
    ...                            ...
    // shared: NAME end            # shared: NAME end

  python tools/check_shared.py --write   rewrite every copy from its source
  python tools/check_shared.py --check   exit 1, naming file and block, where a copy differs from its source,
                                         a marker names no source, or a source is used by no variant
                                         (the tests and CI run this)

A source whose name starts with _ is in no variant yet and is not asked for (none today).
"""
import argparse
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
BLOCKS = ROOT / "common" / "blocks"
VARIANTS = ROOT / "variants"
MARKER = re.compile(r"^[ \t]*(?://|#) shared: (?P<name>[A-Za-z0-9_]+) (?P<end>begin|end)[ \t]*$", re.M)


def sources():
    """Block name -> its source text (ending in one newline)."""
    found = {}
    for path in sorted(BLOCKS.iterdir()):
        if path.suffix in (".h", ".py") and not path.name.startswith("_"):
            if path.stem in found:
                raise SystemExit(f"common/blocks: two sources named {path.stem}")
            found[path.stem] = path.read_text().rstrip("\n") + "\n"
    return found


def blocks_in(text, where):
    """[(name, start, stop)] of each block's content in `text` (between its begin line and its end line)."""
    out, open_name, start = [], None, 0
    for m in MARKER.finditer(text):
        name, end = m.group("name"), m.group("end") == "end"
        if not end:
            if open_name is not None:
                raise SystemExit(f"{where}: block {name} begins inside block {open_name}")
            open_name, start = name, m.end() + 1
        else:
            if open_name != name:
                raise SystemExit(f"{where}: 'shared: {name} end' without its begin")
            out.append((name, start, m.start()))
            open_name = None
    if open_name is not None:
        raise SystemExit(f"{where}: block {open_name} has no end line")
    return out


def rewrite(text, src, where):
    """`text` with every block's content replaced by its source; the list of (name, differed) found."""
    pieces, last, seen = [], 0, []
    for name, start, stop in blocks_in(text, where):
        if name not in src:
            raise SystemExit(f"{where}: block {name} has no source common/blocks/{name}.h or .py")
        pieces += [text[last:start], src[name]]
        seen.append((name, text[start:stop] != src[name]))
        last = stop
    pieces.append(text[last:])
    return "".join(pieces), seen


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help="rewrite every copy from its source")
    mode.add_argument("--check", action="store_true", help="fail where a copy differs from its source")
    args = ap.parse_args(argv)
    src, used, drift = sources(), set(), []
    for path in sorted(VARIANTS.glob("*.py")):
        text = path.read_text()
        new, seen = rewrite(text, src, path.name)
        used.update(name for name, _ in seen)
        drift += [f"variants/{path.name}: block {name} differs from common/blocks/{name}"
                  for name, differed in seen if differed]
        if args.write and new != text:
            path.write_text(new)
    unused = sorted(set(src) - used)
    problems = [f"common/blocks/{name}: used by no variant" for name in unused]
    if args.check:
        problems += drift
    for line in problems:
        print(line)
    if not problems:
        print(f"{'wrote' if args.write else 'checked'} {len(used)} shared blocks in {len(list(VARIANTS.glob('*.py')))} "
              f"variants" + (f" ({len(drift)} rewritten)" if args.write and drift else ""))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
