"""Logic depth of the mapped netlist: gates on the longest combinational path, whole and per block.

Yosys's ``ltp`` only sees paths inside one module, so it needs the design flattened, and it keeps
a map from every bit to its readers: for the larger PEs (over a million gates) the flattened
netlist and that map outgrow the 4 GB the WebAssembly Yosys can address. So Yosys writes the
mapped hierarchy as BLIF (``write_blif -icells -conn``) and the depth is computed here: every
module instance is flattened into integer nets, then one topological pass goes over the gates.
The definition is ``ltp -noff``'s: inputs, constants and flip-flop outputs are at level 0 and each
gate adds one. A block's depth counts only its own gates along a path, as ``ltp`` on a selection.
"""

from dataclasses import dataclass, field

#: Output pins of Yosys's internal gate and flip-flop cells; every other pin is an input.
OUTPUT_PINS = frozenset({"Y", "Q"})


class NetlistError(ValueError):
    """The BLIF netlist is malformed or not a clean synchronous netlist."""


@dataclass
class Model:
    """One BLIF ``.model``: nets numbered locally in order of appearance."""

    nets: dict = field(default_factory=dict)        # net name -> local index
    gates: list = field(default_factory=list)       # (cell type, input nets, output net)
    instances: list = field(default_factory=list)   # (model name, [(port, net)])
    conns: list = field(default_factory=list)       # (net, net): the same wire

    def net(self, name):
        return self.nets.setdefault(name, len(self.nets))


def _lines(path):
    """Statements of a BLIF file: comments dropped, ``\\`` continuations joined."""
    pending = ""
    with open(path) as f:
        for number, line in enumerate(f, 1):
            line = line.split("#", 1)[0].rstrip()
            if line.endswith("\\"):
                pending += line[:-1] + " "
                continue
            line, pending = pending + line, ""
            if line.strip():
                yield number, line.split()


def read_blif(path):
    """The models of a BLIF file written by ``write_blif -icells -conn`` (model name -> Model)."""
    models, model = {}, None
    for number, words in _lines(path):
        keyword = words[0]
        if keyword == ".model":
            model = models[words[1]] = Model()
        elif model is None:
            raise NetlistError(f"{path}:{number}: {keyword} outside a .model")
        elif keyword in (".inputs", ".outputs"):
            for name in words[1:]:
                model.net(name)
        elif keyword == ".subckt":
            pins = [pin.split("=", 1) for pin in words[2:]]
            if any(len(pin) != 2 for pin in pins):
                raise NetlistError(f"{path}:{number}: a .subckt pin is not PIN=NET")
            model.instances.append((words[1], [(port, model.net(net)) for port, net in pins]))
        elif keyword == ".conn":
            model.conns.append((model.net(words[1]), model.net(words[2])))
        elif keyword == ".end":
            model = None
        else:
            raise NetlistError(f"{path}:{number}: unexpected {keyword} (expected a mapped netlist "
                               "of .subckt cells)")
    for model in models.values():
        # A .subckt of a type no model defines is a gate.
        cells = [(kind, pins) for kind, pins in model.instances if kind not in models]
        model.instances = [(kind, pins) for kind, pins in model.instances if kind in models]
        for kind, pins in cells:
            outs = [net for port, net in pins if port in OUTPUT_PINS]
            if len(outs) != 1:
                raise NetlistError(f"{path}: cell {kind} has {len(outs)} outputs (expected one Y or Q)")
            model.gates.append((kind, tuple(net for port, net in pins if port not in OUTPUT_PINS), outs[0]))
    return models


def _find(parent, x):
    while parent[x] != x:
        parent[x] = parent[parent[x]]
        x = parent[x]
    return x


def _flatten(models, top, group_of):
    """Gates of the whole design over global nets: (group, cell type, input nets, output net)."""
    if top not in models:
        raise NetlistError(f"the netlist has no model {top!r}")
    parent, gates = [], []

    def instance(name):
        model = models[name]
        base = len(parent)
        parent.extend(range(base, base + len(model.nets)))
        return base

    stack = [(top, instance(top))]
    while stack:
        name, base = stack.pop()
        model, group = models[name], group_of(name)
        for a, b in model.conns:
            parent[_find(parent, base + a)] = _find(parent, base + b)
        for kind, ins, out in model.gates:
            gates.append((group, kind, [base + n for n in ins], base + out))
        for child, pins in model.instances:
            child_base = instance(child)
            child_nets = models[child].nets
            for port, net in pins:
                if port not in child_nets:
                    raise NetlistError(f"module {child} has no port {port!r} (instantiated in {name})")
                parent[_find(parent, child_base + child_nets[port])] = _find(parent, base + net)
            stack.append((child, child_base))
    return [(group, kind, [_find(parent, n) for n in ins], _find(parent, out)) for group, kind, ins, out in gates]


def depths(models, top, group_of, flip_flops):
    """(longest path of the design, {group: longest path through its own gates}), in gates.

    ``group_of`` maps a model name to its group (block); ``flip_flops`` are the cell types that
    end a path."""
    gates = _flatten(models, top, group_of)
    driver = {}
    for g, (_, kind, _, out) in enumerate(gates):
        if out in driver:
            raise NetlistError(f"a net is driven by two cells ({gates[driver[out]][1]} and {kind})")
        driver[out] = g
    comb = [kind not in flip_flops for _, kind, _, _ in gates]
    preds = [[driver[n] for n in ins if n in driver and comb[driver[n]]] if comb[g] else []
             for g, (_, _, ins, _) in enumerate(gates)]
    readers = [[] for _ in gates]
    pending = [len(p) for p in preds]
    for g, p in enumerate(preds):
        for d in p:
            readers[d].append(g)
    level, own = [0] * len(gates), [0] * len(gates)
    ready = [g for g in range(len(gates)) if comb[g] and not pending[g]]
    done = 0
    while ready:
        g = ready.pop()
        done += 1
        group = gates[g][0]
        level[g] = 1 + max((level[d] for d in preds[g]), default=0)
        own[g] = 1 + max((own[d] for d in preds[g] if gates[d][0] == group), default=0)
        for r in readers[g]:
            pending[r] -= 1
            if not pending[r]:
                ready.append(r)
    if done != sum(comb):
        raise NetlistError(f"combinational loop: {sum(comb) - done} gates are on or behind one")
    per_group = {}
    for g, (group, *_rest) in enumerate(gates):
        per_group[group] = max(per_group.get(group, 0), own[g])
    return max(level, default=0), per_group
