"""Trim the ASAP7 liberty files to the cells the synthesis flow can use, and gzip them into
synth/pdk/asap7/ (run from the repository: ``python synth/pdk/trim.py /path/to/asap7``).

Kept: every combinational cell whose liberty text is under ``MAX_CELL_CHARS`` and the plain
positive- and negative-edge D flip-flops (with and without asynchronous set/reset) and the integrated
clock gates (ICG, for ``clockgate``). Dropped: the three-level AO/OA cells with 3x3 inputs (their
power tables alone are megabytes and ABC rarely picks them), scan flip-flops (the flow inserts none)
and latches (the design has none). The FakeRAM macro models are copied whole: deca.synth.sram calibrates on them.
"""

import gzip
import re
import sys
from pathlib import Path

MAX_CELL_CHARS = 250_000
DROP = re.compile(r"^(SDF|DHL|DLL)")
OUT = Path(__file__).with_name("asap7")
CELL = re.compile(r"^\s*cell\s*\(\s*\"?(\w+)\"?\s*\)", re.M)


def _groups(text):
    """(header, [(cell name, cell text)], trailer): the top-level cell groups of a liberty."""
    starts = [m.start() for m in CELL.finditer(text)]
    cells = []
    for start in starts:
        depth, i = 0, text.index("{", start)
        while True:
            c = text[i]
            depth += (c == "{") - (c == "}")
            i += 1
            if depth == 0:
                break
        cells.append((CELL.match(text, start).group(1), text[start:i]))
        end = i
    return text[:starts[0]], cells, text[end:]


def trim(text):
    header, cells, trailer = _groups(text)
    kept = [body for name, body in cells if len(body) < MAX_CELL_CHARS and not DROP.match(name)]
    return header + "\n".join(kept) + trailer, len(kept), len(cells)


def main(src):
    OUT.mkdir(exist_ok=True)
    for path in sorted(Path(src).glob("*.lib.gz")):
        text = gzip.decompress(path.read_bytes()).decode()
        if path.name.startswith("asap7sc7p5t_"):
            text, kept, total = trim(text)
            print(f"{path.name}: kept {kept} of {total} cells")
        # mtime=0: the same input gives byte-identical output.
        (OUT / path.name).write_bytes(gzip.compress(text.encode(), mtime=0))


if __name__ == "__main__":
    main(sys.argv[1])
