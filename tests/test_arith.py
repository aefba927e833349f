"""The two styles of the arithmetic helpers (``deca.hw.arith``): the proof that they compute the
same (``deca.synth.equiv``), that it finds a difference and names it, and that a design's operators
Verilog is the gates one with only the helpers rewritten."""

import re
from collections import Counter
from pathlib import Path

import pytest

from deca.hw import arith
from deca.hw.arith import Instance, instances_file, read_instances
from deca.sim.measure import campaign
from deca.synth.equiv import PROVED, EquivalenceError, prove

#: One of each kind of call: fast_add with each carry in and network, fast_sum of three and of two
#: operands (a network one bit wider than fast_add's), at_least unsigned and signed, mixed widths.
KINDS = [
    Instance("add", (7, 5), 7, 8, "0"),
    Instance("add", (7, 5), 7, 8, "1"),
    Instance("add", (12, 12), 12, 13, "signal", spread=True),
    Instance("add", (6, 4, 5), 7, 7, "signal"),
    Instance("add", (6, 6), 7, 7, "0"),
    Instance("at_least", (9, 3)),
    Instance("at_least", (9, 3), signed=True),
]


def test_every_kind_of_helper_is_proven_equal_in_both_styles(tmp_path):
    assert prove(KINDS, tmp_path) == len(KINDS)
    assert prove([], tmp_path / "none") == 0  # a block without helpers (deca generate --design lut_array)


def test_a_difference_between_the_styles_names_the_instance(tmp_path, monkeypatch):
    """The operators of three-operand sums off by one: the proof fails and names that instance only."""
    adder = arith._adder

    def faulty(m, rows, width, carry_in, spread, bits):
        result = adder(m, rows, width, carry_in, spread, bits)
        return (result + 1)[:bits] if arith._style.get() == "operators" and len(rows) == 3 else result

    monkeypatch.setattr(arith, "_adder", faulty)
    with pytest.raises(EquivalenceError) as error:
        prove(KINDS, tmp_path)
    assert str(Instance("add", (6, 4, 5), 7, 7, "signal")) in str(error.value)
    assert str(error.value).count("Instance(") == 1


def _sync_targets(verilog):
    """(module, register) of every clocked assignment, Yosys's numbers in names left out."""
    targets, module = Counter(), None
    for line in verilog.read_text().splitlines():
        if line.startswith("module "):
            module = line.split()[1].split("(")[0]
        found = re.match(r"\s+(\\?[^\s\[]+)\s*(?:\[[^\]]*\]\s*)*<=", line)
        if found:
            targets[tuple(re.sub(r"\$\d+", "$", name) for name in (module, found.group(1)))] += 1
    return targets


def test_the_fast_engines_verilog_is_the_gates_one_with_the_helpers_as_operators():
    """W = 8, L = 4: the same registers in the same modules, fewer lines, its instances proven."""
    gates = Path(campaign._generate(8, 4, 2))
    operators = Path(campaign._generate(8, 4, 2, engine="fast"))
    assert _sync_targets(operators) == _sync_targets(gates)
    assert len(operators.read_text()) < 0.8 * len(gates.read_text())
    instances = read_instances(instances_file(operators))
    assert {i.kind for i in instances} == {"add", "at_least"}
    assert operators.with_name(PROVED).read_text().split()[1] == str(len(instances))
