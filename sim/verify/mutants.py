"""Mutants of the PE for ``deca verify --mutant NAME``: each one deliberate fault, a piece of one
generator module's source text replaced, which the regression must find (kill).

``mutant_verilog`` generates the mutant's Verilog in a process of its own (``python -m
deca.sim.verify.mutants``), where the mutated module is loaded in place of the original before
the generator imports it, so every module that uses it sees the fault.
"""

import importlib.abc
import importlib.machinery
import importlib.util
import subprocess
import sys
from pathlib import Path

from deca.errors import UsageError

#: name: (generator module, source text (exactly once in it), its replacement, the fault).
MUTANTS = {
    "prefix_off_by_one": ("deca.hw.expander", "inputs[sd.prefix[j]]", "inputs[sd.prefix[j] + 1]",
                          "the expansion crossbar takes the value one past its prefix sum"),
    "tag_reused_early": ("deca.hw.tags", "with m.If(~kept[i]):\n                m.d.comb += lowest[0]",
                         "with m.If(1):\n                m.d.comb += lowest[0]",
                         "the tag table offers a tag whose line read is still outstanding"),
    "line_before_arrival": ("deca.hw.queues", "~at_least(need, arrived)", "at_least(arrived, need)",
                            "a line queue sends a beat one line before its lines arrived"),
    "dropped_byte_enable": ("deca.hw.queues", "Mux(later, ahead, line_bytes & ~ahead)",
                            "Mux(later, 0, line_bytes & ~ahead)",
                            "a line queue drops the byte enables of a line's bytes that spill into the next row"),
    "wrap_check_off_by_one": ("deca.hw.loader", "Cat(C(0), low | length)", "Cat(C(1), low | length)",
                              "the address-wrap check fails a stream ending on the last byte"),
    "scale_wrong_group": ("deca.hw.scaler", "block.word_select(i * W // g + k, bits)",
                          "block.word_select(min(i * W // g + k + 1, 512 // bits - 1), bits)",
                          "a vOp's elements scaled by the next group's scale"),
    "lost_squash": ("deca.hw.pe", "loader.squash.eq(squash)", "loader.squash.eq(0)",
                    "the loaders never see a squash"),
    "lut_address_bits_swapped": ("deca.hw.lut_array", "chosen.eq(code[:6])",
                                 "chosen.eq(Cat(code[1], code[0], code[2:6]))",
                                 "the LUT read address's two low bits swapped"),
}


def check_mutant(name):
    if name not in MUTANTS:
        raise UsageError(f"unknown mutant {name!r}; choose from {', '.join(MUTANTS)}")


def _source_path(module):
    """The file of a generator module, found without importing it (nor the generator)."""
    package, _, leaf = module.rpartition(".")
    (folder,) = importlib.util.find_spec(package).submodule_search_locations
    return Path(folder) / f"{leaf}.py"


def mutated_source(name):
    """The source of the mutant's module with its fault in; a site not exactly once is refused."""
    module, old, new, _ = MUTANTS[name]
    source = _source_path(module).read_text()
    if source.count(old) != 1:
        raise ValueError(f"mutant {name}: {old!r} occurs {source.count(old)} times in {module}, not once")
    return source.replace(old, new)


class _MutantFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Loads the mutant's module from its mutated source (never from a cached .pyc)."""

    def __init__(self, name):
        self.module, self.source = MUTANTS[name][0], mutated_source(name)

    def find_spec(self, fullname, path, target=None):
        if fullname != self.module:
            return None
        return importlib.util.spec_from_file_location(fullname, _source_path(fullname), loader=self)

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        exec(compile(self.source, module.__file__, "exec"), module.__dict__)


def mutant_verilog(name, W, L, loaders, root):
    """Generate the mutant's Verilog under ``root/name`` (in a separate process); returns its path."""
    check_mutant(name)
    mutated_source(name)  # a stale site fails here, with its name
    proc = subprocess.run([sys.executable, "-m", "deca.sim.verify.mutants", name, str(W), str(L), str(loaders),
                           str(Path(root) / name)], capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(f"generating mutant {name} failed: {proc.stderr.strip().splitlines()[-1:]}")
    from deca.synth.equiv import prove_beside

    path = Path(proc.stdout.strip().splitlines()[-1])
    prove_beside(path)  # the fast engine's arithmetic style (deca.sim.measure.campaign.ENGINE_ARITH)
    return path


def _generate_main(argv):
    name, W, L, loaders, out = argv
    sys.meta_path.insert(0, _MutantFinder(name))
    from deca.hw.generate import generate
    from deca.sim.measure.campaign import DESIGN, ENGINE_ARITH

    print(generate(int(W), int(L), Path(out), **DESIGN, loaders=int(loaders), arith=ENGINE_ARITH["fast"]))


if __name__ == "__main__":
    _generate_main(sys.argv[1:])
