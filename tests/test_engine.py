"""The fast measurement engine (``deca.sim.bench.engine``: the harness and the models in C++ around the
Verilated PE) against the Python path: the same records as the cocotb testbench for ``deca run``'s
workloads (one by default, all under -m slow) in both modes and with squashes; a 20-point sweep's
records with 1, 2 and 4 jobs; the same runs and the same failures (hang, wrong tile, memory
protocol) as the Python Harness on the same simulator, through a rough core and memory
(back-pressure, out-of-order responses, squashes, dropped and malformed requests); its build
errors, the choice of its compiler (under -m slow) and of its popcount, its model's merged memory
write lanes (proven equal by Yosys). The records on the W = 32,
L = 8 PE, whose Verilator builds (the cocotb one of tests/test_pe_rtl.py, the fast engine of the
measurements) the other RTL tests share; the rest on the W = 8, L = 4 PE, whose fast engine
``deca verify``'s tests share.
"""

import asyncio
import re
import shutil
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
from amaranth.back import verilog
from amaranth.hdl import Module
from amaranth.lib.memory import Memory

from deca.golden import compress
from deca.hw.generate import top_name
from deca.hw.layouts import ErrorReason
from deca.sim.bench.bus import CheckFailure, drive_idle, reset
from deca.sim.bench.cores import MODES, gemm_core
from deca.sim.bench.engine import (SOURCES, EngineBuildError, FastHarness, VerilatorBus, _rewrite_popcount, build,
                                    merge_write_lanes, popcount_flags)
from deca.sim.bench.harness import Harness
from deca.sim.bench.pe_bench import Bench
from deca.sim.bench.ports import PePorts
from deca.sim.bench.stimulus import malformed_requests
from deca.sim.bench.system import system
from deca.sim.measure import campaign as campaign_module
from deca.sim.measure.campaign import ENGINES, Campaign, code_digest
from deca.sim.measure.cli import RUN_WORKLOADS
from deca.sim.measure.point import Point
from deca.sim.measure.records import first_difference, read_records
from deca.synth.tools import run_yosys
from deca.toolchain import ToolError

TILES = 6


@pytest.fixture(scope="module")
def lib():
    return build(campaign_module._generate(8, 4, 2, engine="fast"), top_name("pe", 8, 4), PePorts())


#: By default one sparse, scaled workload; every workload of ``deca run`` under -m slow.
SOME_WORKLOADS = ("mxfp4@0.5",)


@pytest.mark.parametrize("workloads", [SOME_WORKLOADS, pytest.param(RUN_WORKLOADS, marks=pytest.mark.slow)],
                         ids=["some", "all"])
def test_engines_measure_the_same_records(tmp_path, seed, workloads):
    """``deca run``'s workloads in both modes, then TEPL with squashes: field by field equal, each
    engine on its own Verilog (the fast engine's arithmetic as operators, the other's as gates)."""
    print(f"seed {seed}")
    # 0.02 per cycle: six MXFP4 tiles at 0.5 met 3 to 49 squashes for each of 400 seeds tried, in
    # 533 to 2,078 cycles; at 0.1 a tile rarely finishes between two, and a run takes 400,000.
    # Without squashes (both modes) half the tiles; with them all six.
    for squash_prob, modes, tiles in ((0.0, MODES, TILES // 2), (0.02, ("tepl",), TILES)):
        params = {"system": system("spr-hbm", squash_prob=squash_prob).as_dict(), "tiles": tiles, "seed": seed,
                  "loaders": 2}
        points = [Point(32, 8, w, m) for w in workloads for m in modes]
        runs = {}
        for engine in ENGINES:  # a campaign's worker, without the process pool
            out = tmp_path / f"{engine}-{squash_prob}"
            verilog = campaign_module._generate(32, 8, 2, engine=engine)
            campaign_module._measure("verilator", verilog, 32, 8, points, {**params, "out": str(out)}, out.name, engine)
            runs[engine] = [read_records(out)[p.key] for p in points]
        assert first_difference(runs["python"], runs["fast"], ("python", "fast")) is None
        assert (sum(r["squashes"] for r in runs["fast"]) > 0) == (squash_prob > 0)


@pytest.mark.parametrize("engine", ["fast", pytest.param("python", marks=pytest.mark.slow)])
def test_a_points_record_is_the_same_alone_and_after_other_points(tmp_path, seed, engine):
    """A point measured alone and as the last of a simulator run gives the same record: nothing one
    point leaves in the PE or the models changes the next (``deca run`` with any --jobs)."""
    print(f"seed {seed}")
    verilog = campaign_module._generate(8, 4, 2, engine=engine)
    params = {"system": system("spr-hbm", squash_prob=0.005).as_dict(), "tiles": 4, "seed": seed, "loaders": 2}
    last = Point(8, 4, "mxfp4@1", "tepl")
    runs = []
    for name, points in (("alone", [last]), ("after", [Point(8, 4, "bf8@0.2", "store"), Point(8, 4, "bf8@1", "tepl"),
                                                       last])):
        out = tmp_path / name
        campaign_module._measure("verilator", verilog, 8, 4, points, {**params, "out": str(out)}, name, engine)
        runs.append([read_records(out)[last.key]])
    assert first_difference(*runs, ("alone", "after other points")) is None


def test_a_twenty_point_sweep_gives_the_same_records_with_1_2_and_4_jobs(tmp_path, seed):
    """How ``--jobs`` shares a sweep's points among simulator runs changes no record (each point
    starts from a reset PE with its own random stream), squashes included."""
    print(f"seed {seed}")
    points = [Point(8, 4, f"{scheme}@{density}", "tepl") for scheme in ("bf8", "mxfp4", "bf16", "nvfp4", "int4")
              for density in (1, 0.5, 0.2, 0.05)]
    settings = {"system": system("spr-hbm", squash_prob=0.005).as_dict(), "tiles": 4, "seed": seed,
                "sim": "verilator", "code": code_digest()}
    runs = {jobs: Campaign(tmp_path / f"jobs{jobs}", settings).run(points, jobs=jobs, log=lambda line: None,
                                                                   engine="fast")
            for jobs in (1, 2, 4)}
    assert sum(r["squashes"] for r in runs[1]) > 0
    for jobs in (2, 4):
        assert first_difference(runs[1], runs[jobs], ("--jobs 1", f"--jobs {jobs}")) is None


def test_first_difference_names_the_record_and_field():
    a = [{"key": "p", "cycles": 10, "vops": 4}, {"key": "q", "cycles": 12, "vops": 4}]
    assert first_difference(a, [dict(r) for r in a]) is None
    b = [dict(a[0]), {**a[1], "vops": 5, "cycles": 13}]
    assert first_difference(a, b, ("python", "fast")) == "record 1 (q): cycles is 12 in python, 13 in fast"
    assert first_difference(a, a[:1]) == "2 records in the first, 1 in the second"


def outcome(lib, seed, harness, batch_of, mode, budget=None, **core):
    """A fresh PE and a Bench with its rough default core and memory; the run's outcome. ``budget``:
    ``Bench.run``'s ``max_cycles`` and ``reissue_cycles``."""
    bus = VerilatorBus(lib)
    try:
        bench = Bench(bus, {"W": 8, "L": 4, "seed": seed}, lambda *args: None, harness)
        drive_idle(bus, bench.ports.inputs)
        asyncio.run(reset(bus))
        batch = batch_of(bench)
        try:
            h, counters = asyncio.run(bench.run(batch, core=lambda requests, rng, **kw: gemm_core(
                mode, requests, rng, **{**kw, **core}), **(budget or {})))
        except CheckFailure as e:
            return type(e).__name__, str(e)
        return ("ok", h.cycle, counters, [(rid, r.label) for rid, r in h.scoreboard.completions],
                [r.label for r in h.core.dropped], h.core.tmul_busy, h.memory.lines_fetched, h.memory.prefetches,
                h.memory.channel_free, bench.rng.bit_generator.state)
    finally:
        bus.close()


def both(lib, seed, batch_of, mode, budget=None, **core):
    python, fast = (outcome(lib, seed, harness, batch_of, mode, budget, **core)
                    for harness in (Harness, FastHarness))
    assert fast == python
    return fast


def tiles_and_errors(bench):
    """A BF8 matrix's tiles with malformed requests between them."""
    batch = bench.batch(compress(bench.rng.normal(size=(16, 32 * 12)), "bf8", density=0.3), "bf8@0.3", 1)
    bad = malformed_requests(batch)
    batch.requests = [*batch.requests[:3], *bad, *batch.requests[3:]]
    return batch


@pytest.mark.parametrize("mode,core", [("tepl", {"squash_prob": 0.01, "reissue": 0.7}), ("store", {})],
                         ids=["tepl-squashes", "store"])
def test_a_rough_system_runs_alike(lib, seed, mode, core):
    """Back-pressure on every port, out-of-order memory, error completions, squashes with dropped
    TEPLs: cycles, counters, completions, memory and generator state all equal. Each malformed
    request completes once with an error or is dropped by the core (squashes may drop them all)."""
    result = both(lib, seed, tiles_and_errors, mode, **core)
    assert result[0] == "ok", result[:2]

    def malformed(labels):
        return [label for label in labels if any(f" {reason.name}: " in label for reason in ErrorReason)]
    completed, dropped = malformed(label for _, label in result[3]), malformed(result[4])
    # each of the seven malformed_requests of a sparse, unscaled BF8 batch exactly once
    assert sorted(completed + dropped) == sorted(set(completed + dropped)) and len(completed + dropped) == 7
    assert result[2]["ERRORS"] == len(completed), result[:3]
    assert mode != "store" or (completed and not dropped)


def test_a_hang_is_reported_alike(lib, seed):
    # A core that never takes a completion: the PE stalls, the watchdog fires with the run's summary.
    kind, message = both(lib, seed, tiles_and_errors, "tepl", resp_backpressure=1.0)
    assert kind == "Hang" and "no handshake and no memory read outstanding for" in message, message
    assert "in flight: id 0" in message


def test_a_budget_raised_by_reissues_is_kept_alike(lib, seed):
    # Two squashes, every request reissued: each adds 10 cycles to the 200 of the run, far too few for it.
    kind, message = both(lib, seed, tiles_and_errors, "tepl", budget={"max_cycles": 200, "reissue_cycles": 10},
                         squash_at=[60, 120])
    budget = re.search(r"the run took more than (\d+) cycles", message)
    assert kind == "Hang" and budget and int(budget[1]) > 200 and (int(budget[1]) - 200) % 10 == 0, message


def test_a_wrong_tile_is_reported_alike(lib, seed):
    def wrong(bench):
        batch = tiles_and_errors(bench)
        index = next(i for i, r in enumerate(batch.requests) if r.label.endswith(" tile 4"))
        good = batch.requests[index]
        batch.requests[index] = replace(good, expected=(*good.expected[:7], good.expected[7] ^ 1 << 100,
                                                        *good.expected[8:]))
        return batch
    kind, message = both(lib, seed, wrong, "tepl")
    assert kind == "Mismatch" and "tile 4 (id " in message and ": row 7 element 6: got" in message


def test_a_memory_protocol_error_is_reported_alike(lib, seed):
    def short(bench):  # the image ends before the tiles' streams do
        batch = tiles_and_errors(bench)
        return replace(batch, image=batch.image[:len(batch.image) // 2])
    kind, message = both(lib, seed, short, "store")
    assert kind == "ProtocolError" and "outside the image" in message


# One flop: the harness steps the model's clocked eval phases, which a design without one lacks.
TINY = "module tiny(input clk, input rst, output reg q);\nalways @(posedge clk) q <= rst;\nendmodule\n"


def test_build_errors_name_the_error_and_the_file(tmp_path, monkeypatch):
    ports = SimpleNamespace(inputs=(), outputs=())
    verilog = tmp_path / "tiny.v"
    verilog.write_text(TINY.replace("endmodule", "wire x = ;\nendmodule"))
    with pytest.raises(EngineBuildError, match=r"building the fast engine of tiny failed: .*tiny\.v:3"):
        build(verilog, "tiny", ports, build_root=tmp_path / "b1")
    verilog.write_text(TINY)
    model = build(verilog, "tiny", ports, build_root=tmp_path / "b2").parent / "obj" / "libVpe.a"
    built = model.stat().st_mtime_ns
    broken = tmp_path / "harness.cpp"
    text = SOURCES[0].read_text()
    broken.write_text(text.replace("void Engine::run(RunSpec* s) {", "void Engine::run(RunSpec* s) { undeclared();"))
    monkeypatch.setattr("deca.sim.bench.engine.SOURCES", (broken, SOURCES[1]))
    shutil.copy(SOURCES[1], tmp_path / SOURCES[1].name)
    with pytest.raises(EngineBuildError, match=r"failed: .*harness\.cpp:\d+:\d+: error: .*undeclared"):
        build(verilog, "tiny", ports, build_root=tmp_path / "b2")
    assert model.stat().st_mtime_ns == built  # a changed harness recompiled only itself


@pytest.mark.slow  # two more builds of the engine's runtime (20 s)
def test_the_compiler_is_chosen_and_keys_the_build(tmp_path, monkeypatch):
    ports = SimpleNamespace(inputs=(), outputs=())
    verilog = tmp_path / "tiny.v"
    verilog.write_text(TINY)
    # c++ under another version line, logging its calls: the same Verilog builds again, elsewhere, with it.
    other, calls = tmp_path / "other-cxx", tmp_path / "calls.log"
    other.write_text(f'#!/bin/sh\n[ "$1" = --version ] && {{ echo "other 1.0"; exit 0; }}\necho "$@" >> {calls}\n'
                     'exec c++ "$@"\n')
    other.chmod(0o755)
    monkeypatch.setenv("DECA_ENGINE_CXX", "c++")
    first = build(verilog, "tiny", ports, build_root=tmp_path / "b")
    monkeypatch.setenv("DECA_ENGINE_CXX", str(other))
    second = build(verilog, "tiny", ports, build_root=tmp_path / "b")
    assert second.parent != first.parent and second.is_file()
    log = calls.read_text()
    assert "verilated.cpp" in log and "harness.cpp" in log  # the model's runtime and the harness
    monkeypatch.setenv("DECA_ENGINE_CXX", "no-such-compiler")
    with pytest.raises(EngineBuildError, match="DECA_ENGINE_CXX=no-such-compiler: no such C"):
        build(verilog, "tiny", ports, build_root=tmp_path / "b")


def test_the_popcount_flag_follows_the_cpu(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu sse4_2 popcnt avx2\n")
    assert popcount_flags("x86_64", cpuinfo) == (("-mpopcnt",),
                                                 "builtin popcount with -mpopcnt (x86-64, the CPU has popcnt)")
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu sse2\n")
    assert popcount_flags("x86_64", cpuinfo)[0] == ()
    assert "no popcnt" in popcount_flags("x86_64", cpuinfo)[1]
    assert popcount_flags("x86_64", tmp_path / "none")[0] == ()
    assert popcount_flags("aarch64", cpuinfo) == ((), "builtin popcount without -mpopcnt (aarch64 is not x86-64)")


def test_the_popcount_rewrite_fails_on_another_verilator(tmp_path):
    (tmp_path / "include").mkdir()
    header, obj = tmp_path / "include" / "verilated_funcs.h", tmp_path / "obj"
    obj.mkdir()
    model = obj / "Vpe___024root__0.cpp"
    model.write_text("x = VL_COUNTONES_I(a) + VL_COUNTONES_I(b) + VL_COUNTONES_Q(c);\n")
    header.write_text("static inline IData VL_COUNTONES_I(IData lhs) VL_PURE {\n")
    assert _rewrite_popcount(obj, tmp_path) == 2
    assert model.read_text() == ("x = (IData)__builtin_popcount(a) + (IData)__builtin_popcount(b)"
                                 " + VL_COUNTONES_Q(c);\n")
    header.write_text("static inline IData VL_COUNTONES_32(IData lhs) VL_PURE {\n")
    with pytest.raises(EngineBuildError, match=r"verilated_funcs\.h has no 'IData VL_COUNTONES_I\(IData\)'"):
        _rewrite_popcount(obj, tmp_path)


#: A memory as Yosys writes the SQQ's rows: escaped names, a bracketed address, a line's bytes
#: written to both halves of a row (the data's slices not the memory's).
SQQ_LIKE = """module sqq(clk, \\$signature__en , rotated, wr, rd, q);
  input clk;
  input [3:0] \\$signature__en ;
  input [7:0] rotated;
  input [1:0] wr;
  input rd;
  output [15:0] q;
  reg [15:0] \\rows.even [1:0];
  always @(posedge clk) begin
    if (\\$signature__en [0])
      \\rows.even [wr[0]][3:0] <= rotated[3:0];
    if (\\$signature__en [1])
      \\rows.even [wr[0]][7:4] <= rotated[7:4];
    if (\\$signature__en [2])
      \\rows.even [wr[0]][11:8] <= rotated[3:0];
    if (\\$signature__en [3])
      \\rows.even [wr[0]][15:12] <= rotated[7:4];
  end
  reg [15:0] _0_;
  always @(posedge clk) begin
    _0_ <= \\rows.even [rd];
  end
  assign q = _0_;
endmodule
"""


def _byte_lanes_memory():
    """Amaranth's Verilog of a 4 x 32-bit memory written in 8-bit lanes."""
    m = Module()
    m.submodules.mem = mem = Memory(shape=32, depth=4, init=[])
    write, read = mem.write_port(granularity=8), mem.read_port()
    return verilog.convert(m, name="lanes", ports=[write.addr, write.data, write.en, read.addr, read.data],
                           emit_src=False)


def _prove_same_memories(tmp_path, gold, gate, name):
    """Yosys: the two modules' memories (as flip-flops) and outputs equal in every cycle, by induction."""
    work = tmp_path / name
    work.mkdir()
    for side, text in (("gold", gold), ("gate", gate)):
        (work / f"{side}.v").write_text(re.sub(r"^module \w+", f"module {side}", text, count=1, flags=re.M))
    (work / "eq.ys").write_text("read_verilog gold.v\nread_verilog gate.v\nproc\nmemory -nomap\nmemory_map\n"
                                "opt_clean\nequiv_make gold gate eq\nhierarchy -top eq\nequiv_simple -seq 2\n"
                                "equiv_induct -seq 2\nequiv_status -assert\n")
    run_yosys("eq.ys", work, f"the merged write lanes of {name}")


@pytest.mark.parametrize("name", ["amaranth", "sqq_like"])
def test_merged_write_lanes_keep_the_memory_cycle_by_cycle(tmp_path, name):
    text = _byte_lanes_memory() if name == "amaranth" else SQQ_LIKE
    merged, count = merge_write_lanes(text)
    assert count == 1 and merged.count("<=") == text.count("<=") - 3
    _prove_same_memories(tmp_path, text, merged, name)
    # The proof can fail: the top lane's enable swapped for its neighbour's.
    top = re.findall(r"\{\d+\{(\S+ ?\[)(\d+)\]\}\}", merged)[0]
    wrong = merged.replace(f"{top[0]}{top[1]}]}}}}", f"{top[0]}{int(top[1]) - 1}]}}}}")
    with pytest.raises(ToolError, match="merged write lanes"):
        _prove_same_memories(tmp_path, text, wrong, f"{name}_wrong")


def test_every_write_port_of_lanes_in_the_pe_is_merged():
    # W = 8, L = 4, 2 loaders: the SQQ's even and odd banks of byte lanes per loader context (2 x 2 x 2)
    # and TOut's 4 banks, a row written in 4 chunks. A Yosys that wrote them otherwise would leave them
    # unmerged: correct, but slower.
    text = Path(campaign_module._generate(8, 4, 2, engine="fast")).read_text()
    merged, count = merge_write_lanes(text)
    lanes = re.compile(r"^    if \(\S+ ?\[\d+\]\)\n      \S+ ?\[.*\]\[\d+:\d+\] <=", re.M)
    assert len(lanes.findall(text)) == 8 * 64 + 4 * 4  # 64-byte rows; 4 chunks a TOut row
    assert count == 12 and not lanes.findall(merged)


@pytest.mark.parametrize("change", [
    # a second writer of the memory: one read-modify-write would undo the other's lanes
    ("  reg [15:0] _0_;\n", "  reg [15:0] _0_;\n  always @(posedge clk) begin\n    \\rows.even [rd] <= 16'h0;\n  end\n"),
    # lanes that leave bits 11:8 out of the word
    ("      \\rows.even [wr[0]][11:8] <= rotated[3:0];\n    if (\\$signature__en [3])\n", ""),
    # lanes at two addresses
    ("\\rows.even [wr[0]][15:12]", "\\rows.even [wr[1]][15:12]"),
])
def test_write_lanes_that_are_not_one_word_write_stay_as_they_are(change):
    text = SQQ_LIKE.replace(*change)
    assert text != SQQ_LIKE
    assert merge_write_lanes(text) == (text, 0)
