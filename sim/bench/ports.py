"""The PE's ports as a testbench sees them: names, directions and payload packers, all derived from
the hardware's own signature (``deca.hw.pe.pe_signature``)."""

from enum import Enum

from amaranth.lib import wiring

from deca.hw.generate import signal_ports
from deca.hw.pe import CONTEXTS, LOADERS, TAGS, mem_tag_bits, pe_signature


class Packer:
    """Dicts of field values to the flat int of an Amaranth ``StructLayout``, and back."""

    def __init__(self, layout):
        self.fields = tuple((name, field.offset, (1 << field.width) - 1) for name, field in layout)
        self._field = {name: (offset, mask) for name, offset, mask in self.fields}
        self.width = layout.size

    def offset(self, name):
        return self._field[name][0]

    def field_width(self, name):
        return self._field[name][1].bit_length()

    def pack(self, values):
        word = 0
        for name, value in values.items():
            offset, mask = self._field[name]
            if type(value) is not int:
                value = int(value.value if isinstance(value, Enum) else value)
            if not 0 <= value <= mask:
                raise ValueError(f"field {name} = {value} does not fit in {mask.bit_length()} bits")
            word |= value << offset
        return word

    def unpack(self, word):
        return {name: word >> offset & mask for name, offset, mask in self.fields}


class PePorts:
    """The ports of a PE with these address, id and tag widths and this many loaders and tile contexts.

    ``inputs`` and ``outputs``: port names (clock and reset excluded); ``widths``: bits of each
    port; ``tepl_req``, ``tepl_resp``, ``mem_req``, ``mem_resp``, ``pf_req``: payload Packers;
    ``tepl_req_ports``: {"valid", "ready", "payload"} names of each loader's request port.
    """

    def __init__(self, addr_bits=48, id_bits=8, tags=TAGS, loaders=LOADERS, contexts=CONTEXTS):
        self.addr_bits, self.id_bits, self.tags, self.loaders = addr_bits, id_bits, tags, loaders
        self.tag_bits = mem_tag_bits(tags, loaders, contexts)
        signature = pe_signature(tags=tags, addr_bits=addr_bits, id_bits=id_bits, loaders=loaders, contexts=contexts)
        ports = [(name, member.flow, member.shape, len(value))
                 for name, member, value in signal_ports(signature, signature.create())]
        self.inputs = tuple(name for name, flow, _, _ in ports if flow == wiring.In)
        self.outputs = tuple(name for name, flow, _, _ in ports if flow == wiring.Out)
        self.widths = {name: width for name, _, _, width in ports}
        shapes = {name: shape for name, _, shape, _ in ports}
        self.tepl_req_ports = tuple({s: f"tepl_req__{i}__{s}" for s in ("valid", "ready", "payload")}
                                    for i in range(loaders))
        self.tepl_req = Packer(shapes["tepl_req__0__payload"])
        self.tepl_resp = Packer(shapes["tepl_resp__payload"])
        self.mem_req = Packer(shapes["mem_req__payload"])
        self.mem_resp = Packer(shapes["mem_resp__payload"])
        self.pf_req = Packer(shapes["pf_req__payload"])

