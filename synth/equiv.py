"""The proof that a design's two arithmetic styles compute the same (``deca.hw.arith``): every
distinct helper call it elaborates (its ``Instance``'s, which ``deca.hw.generate`` lists in
``<top>.arith.json`` beside the operators Verilog) is written alone in both styles, and Yosys proves
their outputs equal for all operand values (a miter of the two, proven by ``sat``, no
simulation). Everything else in the two Verilogs is the same elaboration, so the fast
engine's model (operators) computes what synthesis maps (gates)."""

import hashlib
import re
from pathlib import Path

from amaranth.back import verilog
from amaranth.hdl import Module, Signal

from deca.hw.arith import InstanceCircuit, arith_style, instances_file, read_instances
from deca.toolchain import ToolError

from .tools import run_yosys

#: Beside the Verilog: the digest of the instance list last proven there.
PROVED = "arith.proved"


class EquivalenceError(ToolError):
    """A helper's two styles differ (a fault of the generator, found by the proof)."""


def _verilog(instances, style):
    """One module, ``arith_<style>``, with every instance on ports of its own: ``x<k>_<j>`` the
    operands of instance k, ``c<k>`` its carry in, ``o<k>`` its result."""
    m, ports = Module(), []
    with arith_style(style):
        for k, instance in enumerate(instances):
            circuit = InstanceCircuit(instance)
            m.submodules[f"i{k}"] = circuit
            for j, operand in enumerate(circuit.operands):
                x = Signal(len(operand), name=f"x{k}_{j}")
                m.d.comb += operand.eq(x)
                ports.append(x)
            if isinstance(circuit.carry, Signal):
                c = Signal(name=f"c{k}")
                m.d.comb += circuit.carry.eq(c)
                ports.append(c)
            o = Signal(len(circuit.o), name=f"o{k}")
            m.d.comb += o.eq(circuit.o)
            ports.append(o)
        return verilog.convert(m, name=f"arith_{style}", ports=ports, emit_src=False)


def prove(instances, work):
    """Prove every instance's styles equal, in ``work``; EquivalenceError naming those that differ."""
    instances = sorted(set(instances))
    if not instances:  # a design without helpers (Amaranth writes no module without ports)
        return 0
    work = Path(work)
    work.mkdir(parents=True, exist_ok=True)
    for style in ("gates", "operators"):
        (work / f"arith_{style}.v").write_text(_verilog(instances, style))
    script = [line for style in ("gates", "operators") for line in (
        f"read_verilog arith_{style}.v", f"hierarchy -top arith_{style}", "proc", "flatten", "opt_clean",
        f"design -stash {style}")]
    script += [f"design -copy-from {style} -as arith_{style} arith_{style}" for style in ("gates", "operators")]
    # The miter fails on a port of one style missing in the other; the proof fails with a
    # counterexample, whose differing outputs name the instances.
    script += ["miter -equiv -flatten -make_outputs arith_gates arith_operators miter",
               "hierarchy -top miter", "tee -q -o proof.txt sat -prove trigger 0 -show-outputs miter"]
    (work / "equiv.ys").write_text("\n".join(script) + "\n")
    run_yosys("equiv.ys", work, "Yosys equivalence of the arithmetic styles")
    report = (work / "proof.txt").read_text()
    if "SUCCESS!" not in report:
        values = dict(re.findall(r"\\(\w+_o\d+)\s+\S+\s+\S+\s+([01]+)", report))
        differ = sorted({int(name[6:]) for name in values if name.startswith("gold_o")
                         and values[name] != values.get(f"gate_{name[5:]}")})
        named = "; ".join(str(instances[k]) for k in differ) or "see the proof's log"
        raise EquivalenceError(f"the arithmetic styles differ: {named} ({work / 'proof.txt'})")
    return len(instances)


def prove_beside(verilog_path):
    """Prove the instances listed beside ``verilog_path`` (``<top>.arith.json``), unless that list
    was proven there already (``PROVED`` holds its digest)."""
    listed = instances_file(verilog_path)
    if not listed.is_file():
        raise EquivalenceError(f"{listed} is missing: generate the Verilog with arith=\"operators\"")
    digest = hashlib.sha256(listed.read_bytes()).hexdigest()
    marker = listed.with_name(PROVED)
    if not marker.is_file() or marker.read_text().split()[0] != digest:
        n = prove(read_instances(listed), listed.with_name("arith-equiv"))
        marker.write_text(f"{digest} {n} helper instances proven equal in both styles\n")
