"""Verilog generation: one file per design, named after its top module, plus a port table and, for
the PE, its register map."""

import fcntl
import hashlib
import shutil
import tempfile
from importlib.metadata import version
from pathlib import Path

from amaranth.back import verilog
from amaranth.hdl import Const, Value
from amaranth.lib import data, enum, wiring

from deca.golden import format as golden_format

from .arith import arith_style, instances_file, recording, write_instances
from .params import LOADERS
from .pe import PE
from .registers import register_table
from .stages import RegisteredPorts
from .units import build_unit


def top_name(design, W, L, loaders=LOADERS):
    """The top module (and file) name; a loader count other than the paper's 2 is part of it."""
    return f"deca_{design}_w{W}_l{L}" + (f"_ld{loaders}" if loaders != LOADERS else "")


def signal_ports(signature, interface):
    """[(name, member, value)] of the members of ``interface`` that are ports, named as in the
    Verilog: a constant member (the ``ready`` of an always-ready stream) is none."""
    return [("__".join(map(str, path)), member, Value.cast(value))
            for path, member, value in signature.flatten(interface) if not isinstance(Value.cast(value), Const)]


def ports(component):
    """(name, direction, width, fields) of each top-level port, named as in the Verilog; ``fields``
    describes a structured payload's bit fields or an enumeration's values."""
    rows = []
    for name, member, value in signal_ports(component.signature, component):
        layout = member.shape if isinstance(member.shape, data.StructLayout) else None
        if layout:
            fields = ", ".join(f"{f} [{field.offset + field.width - 1}:{field.offset}]" for f, field in layout)
        elif isinstance(member.shape, enum.EnumType):
            fields = ", ".join(f"{v.name}={v.value}" for v in member.shape)
        else:
            fields = ""
        rows.append((name, "input" if member.flow == wiring.In else "output", len(value), fields))
    return rows


def port_table(component, top):
    """Markdown table of the ports, with the bit fields of every payload."""
    lines = [f"# Ports of {top}", "", "| port | direction | bits | fields (LSB first) or values |", "|---|---|---|---|",
             "| clk | input | 1 | |", "| rst | input | 1 | synchronous, active high |"]
    lines += [f"| {name} | {direction} | {width} | {fields} |" for name, direction, width, fields in ports(component)]
    return "\n".join(lines) + "\n"


def generate(W, L, out_dir, design="pe", registered_ports=False, arith="gates", **params):
    """Write ``<top>.v`` and ``<top>.ports.md`` (and for the PE ``<top>.registers.md``) into
    ``out_dir``; return the Verilog path. ``design``: the PE or one of its units (``deca.hw.units``);
    ``params``: the PE's tags, sqq_bytes, addr_bits, id_bits, which a unit takes as inside the PE;
    ``registered_ports``: a register on every port (``RegisteredPorts``, to synthesize a unit alone);
    ``arith``: the style of the arithmetic helpers (``deca.hw.arith``); "operators" also lists
    their instances in ``<top>.arith.json``, for the proof that the styles agree."""
    top = top_name(design, W, L, params.get("loaders", LOADERS))
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{top}.v"
    with arith_style(arith), recording() as instances:
        component = build_unit(design, W, L, **params)
        if registered_ports:
            component = RegisteredPorts(component)
        # Amaranth 0.5's own port list would include the constants; the directions follow from the design.
        top_ports = {name: (value, None) for name, _, value in signal_ports(component.signature, component)}
        path.write_text(verilog.convert(component, name=top, ports=top_ports, emit_src=False))
    if arith == "operators":
        write_instances(instances, instances_file(path))
    (out_dir / f"{top}.ports.md").write_text(port_table(component, top))
    if isinstance(component, PE):
        (out_dir / f"{top}.registers.md").write_text(f"# Registers of {top}\n\n" + register_table(component.registers))
    return path


def _sources_digest(design, W, L, params):
    """Hash of what the Verilog depends on: the generator's and the format's sources, Amaranth, the parameters."""
    digest = hashlib.sha256(repr((design, W, L, sorted(params.items()), version("amaranth"))).encode())
    for source in sorted(Path(__file__).parent.glob("*.py")) + [Path(golden_format.__file__)]:
        digest.update(source.read_bytes())
    return digest.hexdigest()[:16]


def generate_cached(W, L, cache_dir, design="pe", arith="gates", **params):
    """``generate`` into ``<cache_dir>/<hash>/``, or the Verilog found there from an earlier call
    with the same sources and parameters (generating the largest designs takes a minute). A lock
    file per folder makes concurrent calls (test workers, sweep jobs) wait for one generation."""
    folder = Path(cache_dir) / _sources_digest(design, W, L, {**params, "arith": arith})
    path = folder / f"{top_name(design, W, L, params.get('loaders', LOADERS))}.v"
    if path.is_file():
        return path
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.with_name(f".{folder.name}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not path.is_file():
            tmp = Path(tempfile.mkdtemp(dir=folder.parent, prefix=".tmp-"))
            try:
                generate(W, L, tmp, design=design, arith=arith, **params)
                tmp.rename(folder)  # atomic: a folder that exists is complete
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
    return path
