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
#: The key of a cell's instance name (``write_blif -cname``) among its parameters.
CELL_NAME = ".cname"


class NetlistError(ValueError):
    """The BLIF netlist is malformed or not a clean synchronous netlist."""


@dataclass
class Model:
    """One BLIF ``.model``: nets numbered locally in order of appearance."""

    nets: dict = field(default_factory=dict)        # net name -> local index
    inputs: list = field(default_factory=list)      # port nets
    outputs: list = field(default_factory=list)
    gates: list = field(default_factory=list)       # (cell type, input nets, output net)
    cells: list = field(default_factory=list)       # (cell type, [(pin, net)], {parameter: value}): leaf cells
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


def read_blif(path, gates=True):
    """The models of a BLIF file written by ``write_blif -icells -conn [-param] [-cname]`` (model name ->
    Model; a cell's instance name is its parameter ``CELL_NAME``). ``gates``: also turn the leaf cells into single-output gates of Yosys's internal cell
    library (the generic flow's depth); a liberty netlist is read with ``gates=False``."""
    models, model, params = {}, None, None
    for number, words in _lines(path):
        keyword = words[0]
        if keyword == ".model":
            model = models[words[1]] = Model()
        elif model is None:
            raise NetlistError(f"{path}:{number}: {keyword} outside a .model")
        elif keyword in (".inputs", ".outputs"):
            getattr(model, keyword[1:]).extend(model.net(name) for name in words[1:])
        elif keyword == ".subckt":
            pins = [pin.split("=", 1) for pin in words[2:]]
            if any(len(pin) != 2 for pin in pins):
                raise NetlistError(f"{path}:{number}: a .subckt pin is not PIN=NET")
            params = {}
            model.instances.append((words[1], [(port, model.net(net)) for port, net in pins], params))
        elif keyword == ".param" and params is not None and len(words) >= 3:
            params[words[1]] = " ".join(words[2:])
        elif keyword == ".cname" and params is not None and len(words) == 2:
            params[CELL_NAME] = words[1]
        elif keyword == ".conn":
            model.conns.append((model.net(words[1]), model.net(words[2])))
        elif keyword == ".end":
            model = None
        else:
            raise NetlistError(f"{path}:{number}: unexpected {keyword} (expected a mapped netlist "
                               "of .subckt cells)")
    for model in models.values():
        # A .subckt of a type no model defines is a leaf cell.
        model.cells = [cell for cell in model.instances if cell[0] not in models]
        model.instances = [(kind, pins) for kind, pins, _ in model.instances if kind in models]
        for kind, pins, _ in model.cells if gates else ():
            outs = [net for port, net in pins if port in OUTPUT_PINS]
            if len(outs) != 1:
                raise NetlistError(f"{path}: cell {kind} has {len(outs)} outputs (expected one Y or Q)")
            model.gates.append((kind, tuple(net for port, net in pins if port not in OUTPUT_PINS), outs[0]))
    return models


def find(parent, x):
    """The representative of net ``x`` (union-find with path halving)."""
    while parent[x] != x:
        parent[x] = parent[parent[x]]
        x = parent[x]
    return x


def flatten(models, top):
    """Every instance of every model in the design over global nets: (union-find parent array,
    [(model name, base)]); model ``m``'s local net ``n`` of an instance is ``find(parent, base + n)``."""
    if top not in models:
        raise NetlistError(f"the netlist has no model {top!r}")
    parent, placed = [], []

    def instance(name):
        model = models[name]
        base = len(parent)
        parent.extend(range(base, base + len(model.nets)))
        return base

    stack = [(top, instance(top))]
    while stack:
        name, base = stack.pop()
        placed.append((name, base))
        model = models[name]
        for a, b in model.conns:
            parent[find(parent, base + a)] = find(parent, base + b)
        for child, pins in model.instances:
            child_base = instance(child)
            child_nets = models[child].nets
            for port, net in pins:
                if port not in child_nets:
                    raise NetlistError(f"module {child} has no port {port!r} (instantiated in {name})")
                parent[find(parent, child_base + child_nets[port])] = find(parent, base + net)
            stack.append((child, child_base))
    return parent, placed


def _flatten(models, top, group_of):
    """Gates of the whole design over global nets: (group, cell type, input nets, output net)."""
    parent, placed = flatten(models, top)
    return [(group_of(name), kind, [find(parent, base + n) for n in ins], find(parent, base + out))
            for name, base in placed for kind, ins, out in models[name].gates]


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
