"""deca.synth.netlist: BLIF reading, flattening and the longest combinational path, on small
hand-written netlists whose depths are counted by hand. (test_synth checks it against Yosys's own
``ltp`` on a synthesized datapath.)"""

import pytest

from deca.synth.netlist import NetlistError, depths, read_blif

FF = {"$_DFF_P_"}

# top: a -> NOT -> x; x enters sub twice (a 3-gate chain and a FF); sub's chain output comes back
# to top through a .conn alias and one NAND. Whole path: NOT, 3 chain gates, NAND = 5. The FF's
# output starts again at 0: FF.Q -> NOR -> out2 is 1.
TWO_LEVELS = """\
# a comment
.model top
.inputs a clk
.outputs out out2
.subckt $_NOT_ A=a Y=x
.subckt sub i=x clk=clk o=y q=ffq
.conn y_alias y
.subckt $_NAND_ A=y_alias B=a Y=out
.subckt $_NOR_ A=ffq \\
  B=a Y=out2
.end

.model sub
.inputs i clk
.outputs o q
.subckt $_NOT_ A=i Y=n1
.subckt $_NAND_ A=n1 B=i Y=n2
.subckt $_NOT_ A=n2 Y=o
.subckt $_DFF_P_ C=clk D=i Q=q
.end
"""


def _write(tmp_path, text):
    path = tmp_path / "n.blif"
    path.write_text(text)
    return path


def test_depth_across_modules_and_aliases(tmp_path):
    models = read_blif(_write(tmp_path, TWO_LEVELS))
    assert set(models) == {"top", "sub"}
    assert len(models["top"].gates) == 3 and len(models["sub"].gates) == 4
    whole, per = depths(models, "top", {"top": "t", "sub": "s"}.get, FF)
    assert whole == 5
    # Own gates only: top's longest own run is NOT (or NAND, or NOR) alone; sub's chain is 3.
    assert per == {"t": 1, "s": 3}


def test_instances_of_one_model_are_separate(tmp_path):
    # Two chains of 2 in series through two instances of one model: 4, not 2 and not a loop; both
    # instances are one group, so the group's own path is 4 as well.
    text = """\
.model top
.inputs a
.outputs z
.subckt two i=a o=m
.subckt two i=m o=z
.end
.model two
.inputs i
.outputs o
.subckt $_NOT_ A=i Y=t
.subckt $_NOT_ A=t Y=o
.end
"""
    whole, per = depths(read_blif(_write(tmp_path, text)), "top", lambda name: name, FF)
    assert whole == 4 and per == {"two": 4}


def test_flip_flop_only_design_has_depth_zero(tmp_path):
    text = ".model top\n.inputs d clk\n.outputs q\n.subckt $_DFF_P_ C=clk D=d Q=q\n.end\n"
    assert depths(read_blif(_write(tmp_path, text)), "top", lambda name: name, FF) == (0, {"top": 0})


@pytest.mark.parametrize("text,message", [
    (".model top\n.inputs a\n.outputs y\n.subckt $_NOT_ A=y Y=x\n.subckt $_NOT_ A=x Y=y\n.end\n",
     "combinational loop: 2 gates"),
    (".model top\n.inputs a\n.outputs y\n.subckt $_NOT_ A=a Y=y\n.subckt $_NOT_ A=a Y=y\n.end\n",
     "driven by two cells"),
    (".model top\n.inputs a\n.outputs y\n.names a y\n1 1\n.end\n", "n.blif:4: unexpected .names"),
    (".inputs a\n", "1: .inputs outside a .model"),
    (".model top\n.subckt $_NOT_ A Y=y\n.end\n", "not PIN=NET"),
    (".model top\n.subckt $_NOT_ A=a B=b\n.end\n", r"\$_NOT_ has 0 outputs"),
    (".model top\n.subckt sub nope=a\n.end\n.model sub\n.inputs i\n.end\n", "module sub has no port 'nope'"),
    (".model other\n.end\n", "no model 'top'"),
])
def test_malformed_netlists_are_named(tmp_path, text, message):
    with pytest.raises(NetlistError, match=message):
        depths(read_blif(_write(tmp_path, text)), "top", lambda name: name, FF)
