"""The cocotb runner and the cocotb Bus on a tiny handwritten module, on Icarus and Verilator: tests
pass and fail as they should, parameters arrive, builds are reused, and the Bus's cycle timing,
X/Z detection and register helpers work."""

import shlex
from pathlib import Path

import numpy
import pytest
from _pytest.pathlib import fnmatch_ex

from deca.sim.bench import pe_bench
from deca.sim.bench.runner import BUILD_ROOT, CocotbFailure, _rewritten_files, build_dir, run
from deca.toolchain import SIMULATORS

#: ``steady`` is written the way Yosys writes Amaranth's combinational logic: an ``always @*`` with
#: a trigger that must run it at time 0 although its inputs never change.
TINY_V = """
module tiny(input clk, input rst, input [7:0] a, input [7:0] b, output reg [8:0] sum, output [8:0] comb,
            output floating, output reg steady, input [5:0] cfg__addr, input [31:0] cfg__wdata, input cfg__we,
            output reg [31:0] cfg__rdata);
  reg [31:0] regs [0:63];
  reg trigger = 0;
  reg constant = 0;
  assign comb = a + b;
  assign floating = 1'bz;
  always @* begin
    if (trigger) begin end
    steady = 1'b0;
    if (!constant) steady = 1'b1;
  end
  reg [5:0] addr;
  reg [5:0] read_addr;
  reg [31:0] wdata;
  reg we = 0;
  always @(posedge clk) begin
    sum <= rst ? 9'd0 : a + b;
    addr <= cfg__addr;
    read_addr <= addr;
    wdata <= cfg__wdata;
    we <= cfg__we;
    if (we) regs[addr] <= wdata;
    cfg__rdata <= regs[read_addr];
  end
endmodule
"""

TINY_TB = """
import random

import cocotb

from deca.sim.bench.bus import UnresolvedValue, reset
from deca.sim.bench.cocotb_bus import start, tb_params
from deca.sim.bench.registers import read_regs, write_reg


@cocotb.test()
async def bus_timing(dut):
    params = tb_params()
    rng = random.Random(params["seed"])
    bus = await start(dut)
    bus.set("a", 0)
    bus.set("b", 0)
    await reset(bus)
    await bus.settle()
    assert bus.get("sum") == 0
    assert bus.get("steady") == 1
    await bus.tick()
    previous = 0
    for _ in range(50):
        a, b = rng.randrange(256), rng.randrange(256)
        bus.set("a", a)
        bus.set("b", b)
        await bus.settle()
        assert bus.get("comb") == a + b, "combinational output not settled"
        assert bus.get("sum") == previous, "registered output changed before the clock edge"
        previous = a + b
        await bus.tick()
    await bus.settle()
    try:
        bus.set("a", 1)
    except RuntimeError:
        pass
    else:
        raise AssertionError("set after settle was accepted")
    if params["sim"] == "icarus":
        try:
            bus.get("floating")
        except UnresolvedValue as e:
            assert "floating" in str(e)
        else:
            raise AssertionError("Z read as a number")
    else:
        bus.get("floating")  # Verilator has two states: Z reads as a plain bit
    await bus.tick()


@cocotb.test()
async def registers(dut):
    bus = await start(dut)
    written = {"PARAMS": 0x12345678, "CONFIG": 0x1F, "PREFETCH": 5, "TILES": 0xFFFFFFFF}
    for name, value in written.items():
        await write_reg(bus, name, value)
    assert await read_regs(bus, list(written)) == written
    assert await read_regs(bus, ["TILES", "CONFIG"]) == {"TILES": 0xFFFFFFFF, "CONFIG": 0x1F}


@cocotb.test()
async def fails_on_purpose(dut):
    bus = await start(dut)
    bus.set("a", 1)
    bus.set("b", 3)
    await bus.settle()
    assert bus.get("comb") == 3, f"expected 3, got {bus.get('comb')}"
"""


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny")
    (folder / "tiny.v").write_text(TINY_V)
    (folder / "tiny_tb.py").write_text(TINY_TB)
    return folder


def run_tiny(sim, folder, build_root=BUILD_ROOT, **kwargs):
    # The shared build root keeps the tiny builds from one session to the next.
    return run(sim, [folder / "tiny.v"], "tiny", "tiny_tb", folder, build_root=build_root, **kwargs)


@pytest.mark.parametrize("sim", SIMULATORS)
def test_tests_pass_with_parameters_and_reuse_the_build(sim, tiny, seed):
    results = run_tiny(sim, tiny, params={"sim": sim, "seed": seed}, testcase=["bus_timing", "registers"])
    done = build_dir(sim, "tiny", [tiny / "tiny.v"]) / "build.done"
    assert results.parent.parent == done.parent
    built = done.stat().st_mtime_ns
    run_tiny(sim, tiny, params={"sim": sim, "seed": seed}, testcase="registers", run_name="again")
    assert done.stat().st_mtime_ns == built, "the unchanged design was built again"


@pytest.mark.parametrize("sim", SIMULATORS)
def test_a_failing_cocotb_test_fails(sim, tiny):
    with pytest.raises(CocotbFailure, match=r"fails_on_purpose.*expected 3, got 4"):
        run_tiny(sim, tiny, testcase="fails_on_purpose", run_name="fail")


#: Verilator's second build, with tracing (20 s), under -m slow.
@pytest.mark.parametrize("sim", [pytest.param(sim, marks=pytest.mark.slow) if sim == "verilator" else sim
                                 for sim in SIMULATORS])
def test_waves_next_to_the_plain_build(sim, tiny):
    plain = run_tiny(sim, tiny, testcase="registers", run_name="plain").parent.parent
    results = run_tiny(sim, tiny, params={"sim": sim, "seed": 0}, testcase="bus_timing", run_name="waves", waves=True)
    waves = [p for p in results.parent.iterdir() if p.suffix in (".fst", ".vcd")]
    assert len(waves) == 1 and waves[0].stat().st_size > 0
    assert results.parent.parent.name == plain.name + "-waves" and (plain / "build.done").is_file()


def test_changed_verilog_is_built_anew_and_the_old_build_removed(tmp_path):
    (tmp_path / "tiny_tb.py").write_text(TINY_TB)
    source = tmp_path / "tiny.v"
    source.write_text(TINY_V)
    old = run_tiny("icarus", tmp_path, tmp_path / "build", testcase="registers").parent.parent
    source.write_text(TINY_V.replace("assign comb = a + b;", "assign comb = a + b + 9'd0;"))
    new = run_tiny("icarus", tmp_path, tmp_path / "build", testcase="registers").parent.parent
    assert new != old and new.is_dir() and not old.exists()


def test_unknown_simulator_is_refused(tiny):
    with pytest.raises(ValueError, match="simulator must be one of"):
        run_tiny("ghdl", tiny)


def test_asserts_are_rewritten_in_the_testbench_and_sim_only(tiny):
    # pytest's own matching of cocotb's $COCOTB_REWRITE_ASSERTION_FILES patterns: NumPy and the
    # like are imported as they are (recompiling them took 7 s a simulation).
    patterns = shlex.split(_rewritten_files(tiny))
    def rewritten(path):
        return any(fnmatch_ex(pattern, Path(path)) for pattern in patterns)
    assert rewritten(tiny / "tiny_tb.py") and rewritten(pe_bench.__file__)
    assert not rewritten(numpy.__file__) and not rewritten(pytest.__file__)
