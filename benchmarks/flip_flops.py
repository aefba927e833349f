"""Where the flip-flops of a synthesized PE are: its mapped flip-flop cells, module by module, in
groups that keep the storage the design needs (memories) apart from the registers around it.

    .venv/bin/python benchmarks/flip_flops.py build/synth/deca_pe_w32_l8

Reads the work folder of ``deca synth``: each module's mapped cells (``stat.json``) and, to split
a module between groups, its registers and memories before mapping (``front.il``: a memory's words
x bits become flip-flops, a registered read port a register of its width). A memory the flow left
to an SRAM macro (``cells.ys`` marks its shape ``deca_macro``) holds no flip-flops, its read register
neither: its bits are listed below the table. A module's flip-flops that the mapping added or
removed against ``front.il`` count in the group of the module's other registers. Prints a Markdown
table.
"""

import argparse
import json
import re
from collections import Counter
from fnmatch import fnmatchcase
from pathlib import Path

from deca.synth.memories import rtlil_cells

MEMORY, READ, MACRO = "memory", "read port", "macro"
QUEUES = "*.sqq", "*.mask_queue", "*.scale_queue"
#: (group, module globs (path below the top), register names: MEMORY, READ or a regex; None: any),
#: first match wins.
GROUPS = (
    ("sub-LUTs", ("*.luts",), MEMORY),
    ("TOut buffers", ("tout",), MEMORY),
    ("SQQ banks", ("*.sqq",), MEMORY),
    ("mask and scale queue rows", QUEUES, "read_data"),
    ("memory read registers (SQQ, TOut, sub-LUTs)", ("*",), READ),
    ("line write staging (line, rotation, index, bank enables)", ("realigner", "realigner.*"), None),
    ("line write staging (line, rotation, index, bank enables)", QUEUES, r"w1|rotated|write_(even|odd)"),
    ("line queue beat registers", QUEUES, "beat_data"),
    ("line queue stream registers", QUEUES + tuple(q + ".*" for q in QUEUES), None),
    ("stream register slices (contexts' outputs, pipeline inputs)",
     ("loader*.*_slice", "vops_reg", "values_reg", "scales_reg"), None),
    ("window units", ("loader*.window",), None),
    ("tile contexts' control (request, checks, tag table, line requests)", ("loader*",), None),
    ("pipeline registers (unpacker, LUT addresses, SD, DD, scaler)", ("pipeline", "pipeline.*"), None),
    ("prefetcher", ("prefetcher",), None),
    ("other (TOut's records, request queue, port registers, control registers)", ("*",), None),
)


def group_of(module, name):
    for group, globs, names in GROUPS:
        if any(fnmatchcase(module, g) for g in globs) and (
                names is None or names == name or names not in (MEMORY, READ) and name not in (MEMORY, READ)
                and re.fullmatch(names, name)):
            return group
    raise AssertionError(f"no group for {name} in {module}")


def _int(value):
    return int(value.split("'")[1], 2) if "'" in value else int(value)


def macro_shapes(script):
    """[{parameter: value}] of each memory shape a ``cells.ys`` leaves to SRAM macros (its
    ``setattr -set deca_macro 1 t:$mem_v2 r:WIDTH=512 %i r:SIZE=8 %i ...`` lines)."""
    return [{name: int(value) for name, value in re.findall(r"r:(\w+)=(\d+)", line)}
            for line in script.splitlines() if line.startswith("setattr -set deca_macro ")]


#: Yosys's flip-flop cells before mapping (``front.il``).
FF_TYPES = ("$dff", "$dffe", "$adff", "$adffe", "$sdff", "$sdffe", "$sdffce", "$aldff", "$aldffe", "$dffsr", "$dffsre")


def front_registers(rtlil, macros=()):
    """{module: Counter of register (Q wire) name, MEMORY, READ or MACRO: bits} of an RTLIL file;
    a memory of one of the shapes ``macros`` (``macro_shapes``) counts as MACRO, its read port too."""
    out = {}
    for module, kind, _, params, conns, _ in rtlil_cells(rtlil, ("$mem_v2", *FF_TYPES)):
        bits = out.setdefault(module, Counter())
        if kind == "$mem_v2" and any(all(_int(params[k]) == v for k, v in shape.items()) for shape in macros):
            bits[MACRO] += _int(params["SIZE"]) * _int(params["WIDTH"])
        elif kind == "$mem_v2":
            bits[MEMORY] += _int(params["SIZE"]) * _int(params["WIDTH"])
            bits[READ] += params["RD_CLK_ENABLE"].split("'")[1].count("1") * _int(params["WIDTH"])
        else:
            bits[conns["Q"].split()[0].removeprefix("\\").split("[")[0]] += _int(params["WIDTH"])
    return out


def breakdown(work):
    """(Counter of group: flip-flops, Counter of group: bits in SRAM macros) of a work folder."""
    top = json.loads((work / "stat.json").read_text())
    script = work / "cells.ys"
    front = front_registers(work / "front.il", macro_shapes(script.read_text()) if script.is_file() else ())
    groups, macros = Counter(), Counter()
    names = [name.lstrip("\\") for name in top["modules"]]
    root = min(names, key=len)
    for name, stats in top["modules"].items():
        name = name.lstrip("\\")
        mapped = sum(n for cell, n in stats.get("num_cells_by_type", {}).items() if "DFF" in cell)
        module = name.removeprefix(root).removeprefix(".") or "(top)"
        regs = front.get(name, Counter())
        macros[group_of(module, MEMORY)] += regs.pop(MACRO, 0)
        for reg, bits in regs.items():
            groups[group_of(module, reg)] += bits
        groups[group_of(module, "")] += mapped - sum(regs.values())
    return groups, +macros


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("work", type=Path, help="the work folder of deca synth (build/synth/<top>)")
    args = p.parse_args(argv)
    groups, macros = breakdown(args.work)
    total = sum(groups.values())
    print("| group | flip-flops | share |\n| --- | --- | --- |")
    for group, n in sorted(groups.items(), key=lambda kv: -kv[1]):
        print(f"| {group} | {n:,} | {n / total:.1%} |")
    print(f"| whole PE | {total:,} | |")
    if macros:
        print("\nIn SRAM macros, not flip-flops: " + ", ".join(f"{g} {n:,} bits" for g, n in macros.items()))


if __name__ == "__main__":
    main()
