"""benchmarks/flip_flops.py on a hand-written work folder of deca synth: its groups add up to the
mapped flip-flops, and a memory the flow left to an SRAM macro holds none."""

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _benchmark():
    spec = importlib.util.spec_from_file_location("flip_flops", ROOT / "benchmarks" / "flip_flops.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _memory(name, words, width):
    return "\n".join([f"  cell $mem_v2 \\{name}", f"    parameter \\WIDTH {width}", f"    parameter \\SIZE {words}",
                      "    parameter \\RD_PORTS 1", "    parameter \\WR_PORTS 1", "    parameter \\RD_CLK_ENABLE 1'1",
                      "  end"])


def _register(q, width):
    return "\n".join(["  cell $dff $r", f"    parameter \\WIDTH {width}", f"    connect \\Q \\{q}", "  end"])


def test_a_macro_memory_holds_no_flip_flops(tmp_path):
    """TOut: two 8 x 4 memories (one shape, left to macros by cells.ys) and a 3-bit register,
    mapped to 3 flip-flops; a LUT array: one 4 x 2 memory in flip-flops with its 2-bit read
    register, mapped to 10. Without the macros the TOut buffers group would take 64 bits and the
    other group -64."""
    ff = _benchmark()
    front = ["module \\pe", "end", "module \\pe.tout", _memory("buffer0", 8, 4), _memory("buffer1", 8, 4),
             _register("records", 3), "end", "module \\pe.pipeline.luts", _memory("lut0", 4, 2), "end", ""]
    (tmp_path / "front.il").write_text("\n".join(front))
    (tmp_path / "cells.ys").write_text(
        "synth -top pe -noabc -run coarse:fine\n"
        "setattr -set deca_macro 1 t:$mem_v2 r:WIDTH=4 %i r:SIZE=8 %i r:RD_PORTS=1 %i r:WR_PORTS=1 %i\n"
        "memory_map -attr !deca_macro\n")
    dff = "DFFHQNx1_ASAP7_75t_R"
    (tmp_path / "stat.json").write_text(json.dumps({"modules": {
        "\\pe": {"num_cells_by_type": {}},
        "\\pe.tout": {"num_cells_by_type": {dff: 3, "$mem_v2": 2, "INVx1_ASAP7_75t_R": 5}},
        "\\pe.pipeline.luts": {"num_cells_by_type": {dff: 10}}}}))
    groups, macros = ff.breakdown(tmp_path)
    assert +groups == {"other (TOut's records, request queue, port registers, control registers)": 3,
                       "sub-LUTs": 8, "memory read registers (SQQ, TOut, sub-LUTs)": 2}
    assert macros == {"TOut buffers": 64}
