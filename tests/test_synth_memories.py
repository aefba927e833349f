"""The memory chooser on small shapes against hand-computed costs, and the standard-cell candidate of a
small memory measured by the flow."""

import pytest

from deca.synth import cells, memories, sram
from deca.synth.memories import Candidate, Memory

PERIOD = 400.0


def _fakeram_terms():
    """fixed, per bit, per word solved by hand from the three FakeRAM macros' liberty areas."""
    import numpy as np

    shapes = [(2048, 39, 3353.857), (256, 256, 2751.883), (64, 256, 1517.411)]
    a = np.array([[1.0, w * b, w] for w, b, _ in shapes])
    return np.linalg.solve(a, np.array([s[2] for s in shapes]))


def _mem(words, width, sync_reads=(True,), writes=1, shared=False):
    return Memory("m", "mem", words, width, tuple(sync_reads), writes, shared)


def test_single_port_macro_cost_is_the_fakeram_fit():
    fixed, per_bit, per_word = _fakeram_terms()
    macro, why = memories.macro_candidate(_mem(64, 16, shared=True), sram.fit())
    assert why is None and (macro.kind, macro.copies) == ("1rw", 1)
    assert macro.area == pytest.approx(fixed + 1024 * per_bit + 64 * per_word, rel=1e-9)
    assert macro.period_ps == pytest.approx(218.0 + 50.0)


def test_auto_keeps_the_cheaper_candidate_that_fits():
    fixed, per_bit, per_word = _fakeram_terms()
    model = sram.fit()
    small = _mem(64, 16, shared=True)
    macro, why = memories.macro_candidate(small, model)
    cells_small = Candidate("cells", 1, 400.0, 150.0, 150.0)
    chosen, reason = memories.choose(small, cells_small, macro, why, "auto", PERIOD)
    assert chosen is cells_small and reason == f"cells 400 µm² < macro {fixed + 1024 * per_bit + 64 * per_word:,.0f} µm²"
    big = _mem(2048, 39, shared=True)
    macro, why = memories.macro_candidate(big, model)
    cells_big = Candidate("cells", 1, 20000.0, 300.0, 300.0)
    chosen, _ = memories.choose(big, cells_big, macro, why, "auto", PERIOD)
    assert chosen is macro and chosen.area == pytest.approx(3353.857, rel=1e-6)
    # A cheaper candidate that misses the period loses to one that fits.
    slow = Candidate("cells", 1, 100.0, 450.0, 450.0)
    chosen, reason = memories.choose(small, slow, *memories.macro_candidate(small, model), "auto", PERIOD)
    assert chosen.kind == "1rw" and reason == "the other needs 450 ps > 400 ps"
    # --memories forces the kind.
    assert memories.choose(big, cells_big, macro, None, "cells", PERIOD)[0] is cells_big
    assert memories.choose(small, cells_small, *memories.macro_candidate(small, model), "macros", PERIOD)[0].kind == "1rw"


@pytest.mark.parametrize("memory,why", [
    (_mem(64, 16), "no 1r1w macro calibrated (macro liberties have 1rw); not extrapolated"),
    (_mem(16, 32, shared=True), "512 bits, below the smallest macro (1024)"),
    (_mem(64, 16, (True, False)), "read port 1 is asynchronous (a macro reads on the clock edge)"),
    (_mem(64, 16, writes=2), "2 write ports (a macro has one)"),
])
def test_no_macro_where_no_model_stands_behind_it(memory, why):
    macro, reason = memories.macro_candidate(memory, sram.fit())
    assert macro is None and reason == why
    cells_cost = Candidate("cells", 1, 5000.0, 200.0, 200.0)
    assert memories.choose(memory, cells_cost, None, reason, "macros", PERIOD) == (cells_cost, f"no macro: {why}")


def test_read_ports_replicate_one_read_one_write_macros():
    # A 1R1W calibration (fixed 100, 0.1 per bit, 1 per word) by hand: 2 read ports -> 2 copies.
    model = sram.MacroModel(kinds={"1r1w": [100.0, 0.1, 1.0]}, access_ps=200, setup_ps=50, leakage_uw=1, energy_fj=1,
                            input_cap_ff=1, calibration=())
    macro, _ = memories.macro_candidate(_mem(64, 16, (True, True)), model)
    assert (macro.kind, macro.copies) == ("1r1w", 2)
    assert macro.area == pytest.approx(2 * (100 + 0.1 * 1024 + 64))
    chosen, reason = memories.choose(_mem(64, 16, (True, True)), Candidate("cells", 1, 800.0, 150, 150), macro, None,
                                     "auto", PERIOD)
    assert chosen is macro and reason == "cells 800 µm² > macro 533 µm² (2 copies, one per read port)"


def test_bad_mode_and_macro_liberties(tmp_path):
    with pytest.raises(ValueError, match="--memories must be one of auto, cells, macros, got 'fast'"):
        cells.technology(memory_mode="fast")
    with pytest.raises(ValueError, match="three 1rw macros of different shapes, found 1"):
        cells.technology(macro_liberties=[sram.FAKERAM[0]])
    with pytest.raises(ValueError, match="does not exist"):
        cells.technology(macro_liberties=[tmp_path / "none.lib"])


def test_cells_candidate_measured_alone(tmp_path):
    """An 8 x 4 one-read-one-write memory: 32 storage flip-flops (plus its 4-bit read register) in its
    module, a positive area and read time; the front end reads back the shape it was written with."""
    memory = _mem(8, 4)
    tech = cells.technology()
    c = cells.measure_memory(memory, tech, tmp_path)
    assert c.kind == "cells" and c.area > 0 and 0 < c.access_ps < PERIOD
    found = cells._memories(tmp_path / "memories" / "m8x4rsw1" / "front.il")
    assert [(m.words, m.width, m.sync_reads, m.writes) for m in found] == [(8, 4, (True,), 1)]
    import json

    from deca.synth.stats import _module_stats
    own, _ = _module_stats(json.loads((tmp_path / "memories" / "m8x4rsw1" / "stat.json").read_text()), "area", float)
    lib = cells.load_library(tech)
    flops = sum(n for t, n in own["mem"][0].items() if lib.cells[t].sequential)
    assert flops == 8 * 4 + 4


def test_words_take_the_smallest_flip_flop_and_keep_their_names(tmp_path):
    """The words of a memory in cells are the library's smallest flip-flop, with only an inverted
    output (ASAP7's DFFHQNx1), its read register dfflibmap's choice (DFFHQx4), and the flow gives every
    word bit's output back the name the activity count replays (``name_flop_outputs``)."""
    from deca.synth.activity import _ROW_BIT, name_flop_outputs
    from deca.synth.netlist import read_blif

    tech = cells.technology()
    cells.measure_memory(_mem(8, 4), tech, tmp_path)
    folder = tmp_path / "memories" / "m8x4rsw1"
    models = read_blif(folder / cells.NETLIST, gates=False)
    kinds = [kind for kind, _, _ in models["mem"].cells if kind.startswith("DFF")]
    assert sorted(set(kinds)) == ["DFFHQNx1_ASAP7_75t_R", "DFFHQx4_ASAP7_75t_R"]
    assert kinds.count("DFFHQNx1_ASAP7_75t_R") == 8 * 4 and kinds.count("DFFHQx4_ASAP7_75t_R") == 4
    assert not any(_ROW_BIT.match(net) for net in models["mem"].nets)  # ABC folded the inverters away
    name_flop_outputs(models, folder / cells.PREGATE, cells.load_library(tech))
    rows = {_ROW_BIT.match(net).groups(): index for net, index in models["mem"].nets.items() if _ROW_BIT.match(net)}
    assert set(rows) == {("m", str(r), str(b)) for r in range(8) for b in range(4)}
    qn = {net for kind, pins, _ in models["mem"].cells if kind.startswith("DFFHQN") for pin, net in pins if pin == "QN"}
    assert set(rows.values()) == qn


@pytest.mark.parametrize("W,buffers", [(32, 2), (8, 1), (64, 3)])
def test_tout_buffers_are_single_port_memories(W, buffers, tmp_path):
    """TOut as the flow reads it: one memory per tile buffer, of ``memory_rows`` shape, its read port
    synchronous and on its write port's address, so a ``1rw`` macro candidate."""
    from deca.hw.generate import generate, top_name
    from deca.hw.tout import BANKS, memory_rows
    from deca.synth.tools import run_yosys

    path = generate(W, 8, tmp_path, design="tout", tout_buffers=buffers)
    (tmp_path / "front.ys").write_text(cells.front_script(path.name, top_name("tout", W, 8)))
    run_yosys("front.ys", tmp_path, "Yosys front end of TOut")
    found = cells._memories(tmp_path / cells.MEMORIES_IL)
    width, words = memory_rows(W)
    assert sorted(m.name for m in found) == [f"buffer{i}_{b}" for i in range(buffers) for b in range(BANKS)]
    assert {(m.words, m.width, m.sync_reads, m.writes, m.ports) for m in found} == {(words // BANKS, width, (True,), 1, "1RW")}
    macro, why = memories.macro_candidate(found[0], sram.fit())
    assert why is None and macro.kind == "1rw"


def test_one_hot_memory_equals_the_multiplexer_tree(tmp_path):
    """``synth/memory_cells.v`` against Yosys's own ``memory_map`` on a 6 x 3 memory with per-bit
    write enables, a synchronous read port with an enable and an asynchronous one: the two are
    equal on every input sequence of 12 cycles from the same state (a SAT proof); the techmap
    took the memory (no ``$mem_v2`` left) and its rows carry the names the activity count reads."""
    from deca.synth.activity import _ROW_BIT
    from deca.synth.tools import run_yosys

    (tmp_path / "mem.v").write_text("""
module mem(input clk, input [2:0] wa, input [2:0] wd, input [2:0] we, input [2:0] ra, input [2:0] rb,
           input re, output reg [2:0] qa, output [2:0] qb);
  reg [2:0] m [0:5];
  integer i;
  always @(posedge clk) for (i = 0; i < 3; i = i + 1) if (we[i]) m[wa][i] <= wd[i];
  always @(posedge clk) if (re) qa <= m[ra];
  assign qb = m[rb];
endmodule
""")
    cells._stage_memory_cells(tmp_path)
    (tmp_path / "eq.ys").write_text("\n".join([
        "read_verilog mem.v", "hierarchy -top mem", "proc", "opt_clean", "memory -nomap",
        "select -assert-count 1 t:$mem_v2", "copy mem gold", "copy mem gate", "delete mem",
        "memory_map gold", f"techmap -map {cells.MEMORY_CELLS.name} gate", "select -assert-none gate/t:$mem_v2",
        "opt_clean", "tee -o names.txt select -list gate/w:*.q", "techmap", "opt_clean",
        "miter -equiv -flatten -make_assert gold gate miter",
        "sat -verify -prove-asserts -set-init-zero -seq 12 miter"]) + "\n")
    run_yosys("eq.ys", tmp_path, "Yosys equivalence of the one-hot memory")
    wires = [line.split("/", 1)[1] for line in (tmp_path / "names.txt").read_text().split() if line.startswith("gate/")]
    rows = {_ROW_BIT.match(f"{wire}[2]").groups() for wire in wires}
    assert rows == {("m", str(r), "2") for r in range(6)}
