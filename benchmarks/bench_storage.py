"""The PE's storage sized by measurement: for candidate sizes of each storage parameter
(``deca.hw.params``: tile contexts per loader, tags, SQQ bytes, TOut buffers), the cycles per tile
of every ``deca run`` workload and the flip-flops the sizes cost.

    .venv/bin/python benchmarks/bench_storage.py [--W 32 --L 8] [--out out/storage] [--json out/storage/storage.json]

Each candidate is ``deca run --seed 1 --jobs 1`` on the PE with those sizes (a folder per candidate
under ``--out``: an interrupted study resumes). The reference is the sizes the study started from
(``REFERENCE``); each candidate below it changes one parameter to a size below the defaults', and
the last is the generator's defaults. A candidate passes when BF8 at 5% density takes at most ``TARGET`` cycles per tile and no
point (workload and invocation mode) takes more than ``SLOWER`` more cycles than the reference's.

Flip-flops: the register bits of the tile contexts (all ``loaders`` x ``contexts`` of them) and
TOut, the blocks these sizes change, each unit generated alone as inside the PE and counted by Yosys
with its memories as flip-flops (``proc; flatten; memory -nomap; memory_map``), as the standard-cell
flow maps memories of this size; ``bits``: what the sizes hold (SQQ, mask and scale rows, tag-table
lines, TOut buffers).
"""

import argparse
import json
import re
import shlex
import subprocess
import sys
from functools import cache
from pathlib import Path

DECA = str(Path(sys.executable).with_name("deca"))
#: The sizes the study started from (before it: two tile contexts per loader, 32 tags and 2 KB of
#: SQQ per loader, a TOut buffer per loader).
REFERENCE = {"contexts": 2, "tags": 32, "sqq_bytes": 2048, "tout_buffers": 2}
#: One parameter changed from the reference per candidate, each below what the defaults keep (one
#: tile context per loader: with the shares of the tags and the SQQ a context has in the reference).
#: 512 SQQ bytes per loader, the defaults', are the least two contexts can have at W = 32, L = 8
#: (``deca.hw.pe.check_pe_params``).
CANDIDATES = [{"contexts": 1, "tags": 16, "sqq_bytes": 1024}, {"tout_buffers": 1}, {"tags": 8}]
TARGET = 17.6     # cycles per tile of BF8 at 5% density (issue 44), to the 0.1 cycle
SLOWER = 0.02     # the most any point may lose against the reference
LOADERS = 2


def options(storage, defaults):
    """``deca run``'s options for ``storage``: the sizes other than the ``defaults`` (so that the
    defaults' folder is plain ``deca run``'s)."""
    return [f"--{name.replace('_', '-')}={value}" for name, value in storage.items() if value != defaults[name]]


def name_of(storage):
    return "-".join(f"{k}{v}" for k, v in storage.items())


def measure(storage, defaults, W, L, out):
    """{point key without the design: cycles per tile} of ``deca run`` on the PE with ``storage``."""
    folder = out / name_of(storage)
    subprocess.run([DECA, "run", "--W", str(W), "--L", str(L), "--seed", "1", "--jobs", "1", "--baseline", "none",
                    "--out", str(folder), *options(storage, defaults)], check=True, stdout=subprocess.DEVNULL)
    return {r["key"].split("-", 1)[1]: r["cycles_per_tile"] for r in json.loads((folder / "results.json").read_text())}


#: The storage parameters each unit depends on.
UNIT_STORAGE = {"loader": ("contexts", "tags", "sqq_bytes"), "tout": ("contexts", "tout_buffers")}


def register_bits(design, W, L, storage, out):
    """Flip-flops of the unit ``design`` of the PE with ``storage``, its memories mapped to flip-flops."""
    return _register_bits(design, W, L, tuple((k, storage[k]) for k in UNIT_STORAGE[design]), out)


@cache
def _register_bits(design, W, L, storage, out):
    from deca.hw.generate import generate
    from deca.synth.tools import run_yosys

    storage = dict(storage)
    folder = out / "units" / f"{design}-{name_of(storage)}"
    path = generate(W, L, folder, design=design, loaders=LOADERS, **storage)
    (folder / "count.ys").write_text(f"read_verilog -sv {path.name}\nhierarchy -top {path.stem}\nproc\nflatten\n"
                                     "opt_clean\nmemory -nomap\nmemory_map\nopt -fast\nopt_clean\n"
                                     "tee -q -o stat.json stat -json -width\n")
    run_yosys("count.ys", folder, f"counting the flip-flops of {design}")
    cells = json.loads((folder / "stat.json").read_text())["design"]["num_cells_by_type"]
    return sum(n * int(re.fullmatch(r"\$\w*dff\w*_(\d+)", cell).group(1)) for cell, n in cells.items() if "dff" in cell)


def storage_bits(storage, W, L):
    """Bits the sizes hold: SQQ, a mask and a scale row per context, tag-table lines, TOut buffers."""
    from deca.hw.tags import line_layout

    contexts = LOADERS * storage["contexts"]
    return (LOADERS * storage["sqq_bytes"] * 8 + contexts * 2 * 512
            + LOADERS * storage["tags"] * line_layout().size + storage["tout_buffers"] * 8 * 1024)


def main(argv=None):
    from deca.hw.params import STORAGE, tout_buffer_count
    from deca.hw.pe import sqq_byte_count

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--W", type=int, default=32)
    p.add_argument("--L", type=int, default=8)
    p.add_argument("--out", type=Path, default=Path("out/storage"), help="the runs' folders (default out/storage)")
    p.add_argument("--json", type=Path, help="also write the record here")
    args = p.parse_args(argv)
    defaults = {**STORAGE, "tout_buffers": tout_buffer_count(STORAGE["tout_buffers"], LOADERS),
                "sqq_bytes": sqq_byte_count(STORAGE["sqq_bytes"], args.W, args.L, STORAGE["contexts"])}
    rows = []
    for change in [{}, *CANDIDATES, {k: v for k, v in defaults.items() if v != REFERENCE[k]}]:
        storage = {**REFERENCE, **change}
        cycles = measure(storage, defaults, args.W, args.L, args.out)
        flops = {"contexts": LOADERS * storage["contexts"] * register_bits("loader", args.W, args.L, storage, args.out),
                 "tout": register_bits("tout", args.W, args.L, storage, args.out)}
        rows.append({"change": change, "storage": storage, "defaults": storage == defaults, "cycles": cycles,
                     "flip_flops": flops, "bits": storage_bits(storage, args.W, args.L)})
        print(f"{name_of(storage)}: {sum(flops.values()):,} flip-flops, "
              + ", ".join(f"{k} {v:.1f}" for k, v in cycles.items()), flush=True)
    reference = rows[0]["cycles"]
    for row in rows:
        worst = max(row["cycles"][k] / reference[k] - 1 for k in reference)
        row["slowest"] = worst
        row["passes"] = round(row["cycles"]["bf8@0.05-tepl"], 1) <= TARGET and worst <= SLOWER
    rec = {"command": "python " + shlex.join(["benchmarks/bench_storage.py", *(sys.argv[1:] if argv is None else argv)]),
           "W": args.W, "L": args.L, "loaders": LOADERS, "target": TARGET, "slower": SLOWER, "reference": REFERENCE,
           "rows": rows}
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(rec, indent=1) + "\n")
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
