"""The complete DECA PE (paper, Fig. 7 and 10; sections 5.2, 5.3 and 6.1).

    tepl_req[0..n] ─► request queue ─► tile contexts 0a, 0b, ... na, nb ─┐ vops, values, scales
                      (in order)       (tags, queues, window each)       ├─► TileMux ─► Pipeline ─► TOut ─► tepl_resp
         mem_req / mem_resp ◄──► every context                          ─┘  (request order)        (records, buffer ring)
         pf_req ◄── Prefetcher (sees each request accepted, and demanded)   cfg ◄──► Control     squash ──► everything in flight

There are ``loaders`` TEPL ports (2 to 4; the paper's 2 by default), each with a loader of
``contexts`` tile contexts (a ``Loader`` unit with its share of the loader's tag table and SQQ,
its mask and scale queues and its window unit), and ``tout_buffers`` TOut buffers (one per loader
by default; the storage parameters of ``params``). The ports feed one
request queue (an entry per port), in acceptance order; its head goes to the first idle tile
context of any loader, so a tile's lines are fetched while earlier tiles still drain into the
pipeline (the paper's loader holds one tile, from its metadata to its last beat). The prefetcher
sees a request when it is accepted, so that the tiles waiting in the queue lengthen its lookahead,
and when it leaves the queue, when its lines are demanded. Every request that leaves the queue
gets one entry in each order FIFO, which the pipeline's three input selectors follow; every
accepted request gets a record in TOut, whose completions go out in request order. A context
takes its next request once its tile has left its queues; a tile takes a TOut buffer with its
first chunk out of the pipeline, and gives it back with its last completion row. A squash resets
the request queue, the contexts' state, the order FIFOs, the pipeline and TOut in one cycle; the
tag tables keep their entries (stale) until the aborted lines come back, and the prefetcher and
registers are untouched.

Everything but the control registers runs in the local ``datapath`` domain: the ``sync`` clock,
and as reset a flip-flop copy of ``rst``, so that the input reaches that flip-flop and the
registers alone, not the tens of thousands of flip-flops behind it (its buffer tree made the
input the PE's slowest path). The datapath leaves reset a cycle after ``rst`` falls; in that
cycle the ports are closed (no ``ready``, no ``valid``).
"""

import operator
from functools import reduce

from amaranth.hdl import Cat, ClockDomain, ClockSignal, DomainRenamer, Module, Mux, ResetInserter, ResetSignal, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .control import COUNTER_INDEX, Control, RegisterBusSignature
from .layouts import (MODE_MEMBERS, sqq_row_bytes, ScaleFormat, mem_request_layout, mem_response_layout,
                      prefetch_layout, scale_beat_layout, tepl_request_layout, tepl_response_layout, value_beat_bits,
                      value_beat_layout, vop_layout)
from .loader import Loader, framed
from .params import (CONTEXTS, LOADERS, SQQ_BYTES, TAGS, TOUT_BUFFERS, ParameterError, check_contexts, check_loaders,
                     check_params, tout_buffer_count)
from .pipeline import Pipeline
from .queues import LineRealigner
from .prefetcher import Prefetcher
from .registers import registers
from .stages import OutputBuffer, RegisterQueue, RegisterSlice, ShiftQueue
from .tout import TOut

#: Cycles from the pipeline's chunk that completes a tile row to the row's beat on ``tepl_resp``
#: (core ready, no earlier beat in the way, no chunk for the row's bank in its read cycle): TOut
#: reads the row in the next cycle, into its response register, then the port's response register.
ROW_LATENCY = 3


def in_datapath(elaboratable):
    """``elaboratable`` in the PE's ``datapath`` domain (see the module's docstring)."""
    return DomainRenamer("datapath")(elaboratable)


def request_queue_entries(loaders):
    """Entries of the request queue: one TEPL accepted but not yet in a tile context per port. The
    prefetcher sees a request when it is accepted, so that the queue lengthens its lookahead by as
    many tiles."""
    return loaders


def sqq_byte_count(sqq_bytes, W, L, contexts=CONTEXTS):
    """SQQ bytes per loader: ``sqq_bytes``, or when it is None the least, four rows per tile context."""
    return contexts * 4 * sqq_row_bytes(W, L) if sqq_bytes is None else sqq_bytes


def check_pe_params(W, L, tags=TAGS, sqq_bytes=SQQ_BYTES, addr_bits=48, id_bits=8, loaders=LOADERS, contexts=CONTEXTS,
                    tout_buffers=TOUT_BUFFERS):
    check_params(W, L)
    check_loaders(loaders)
    check_contexts(contexts)
    tout_buffer_count(tout_buffers, loaders)
    sqq_bytes = sqq_byte_count(sqq_bytes, W, L, contexts)
    # Each context's share is a power of two: its tag table at least two entries, its SQQ at least
    # four rows (a row: a line, or a value beat when that is wider), two per bank: a one-row bank
    # would have a zero-width address, which Verilog cannot declare.
    split = f"split between its {contexts} tile context{'s' * (contexts > 1)}"
    if not isinstance(tags, int) or tags % contexts or not _power_of_two(tags // contexts, 2) or tags > 256:
        raise ParameterError(f"tags must be {contexts} x a power of two >= 2, at most 256 (tag-table entries per "
                             f"loader, {split}), got {tags!r}")
    row = sqq_row_bytes(W, L)
    if not isinstance(sqq_bytes, int) or sqq_bytes % contexts or not _power_of_two(sqq_bytes // contexts, 4 * row):
        raise ParameterError(f"sqq_bytes must be {contexts} x a power of two >= {4 * row} for W = {W}, L = {L} "
                             f"(SQQ bytes per loader, {split}), got {sqq_bytes!r}")
    if not isinstance(addr_bits, int) or not 16 <= addr_bits <= 64:
        raise ParameterError(f"addr_bits must be in 16..64, got {addr_bits!r}")
    if not isinstance(id_bits, int) or not 1 <= id_bits <= 16:
        raise ParameterError(f"id_bits must be in 1..16, got {id_bits!r}")


def _power_of_two(n, least):
    return n >= least and not n & (n - 1)


def mem_tag_bits(tags, loaders=LOADERS, contexts=CONTEXTS):
    """Width of a memory tag: the tile context's tag-table entry, and above it the context's number."""
    return (tags // contexts - 1).bit_length() + (loaders * contexts - 1).bit_length()


def pe_signature(*, tags=TAGS, addr_bits=48, id_bits=8, loaders=LOADERS, contexts=CONTEXTS):
    """The PE's ports, which depend on neither W nor L (testbenches derive names and payloads from it)."""
    tag_bits = mem_tag_bits(tags, loaders, contexts)
    return wiring.Signature({
        "tepl_req": In(stream.Signature(tepl_request_layout(addr_bits, id_bits))).array(loaders),
        "tepl_resp": Out(stream.Signature(tepl_response_layout(id_bits))),
        "mem_req": Out(stream.Signature(mem_request_layout(addr_bits, tag_bits))),
        "mem_resp": In(stream.Signature(mem_response_layout(tag_bits), always_ready=True)),
        "pf_req": Out(stream.Signature(prefetch_layout(addr_bits))),
        "cfg": In(RegisterBusSignature()),
        "squash": In(1),
    })


def tile_context(W, L, *, tags, sqq_bytes, contexts, addr_bits, id_bits):
    """One tile context of a loader: a ``Loader`` unit with its share of the loader's tag table and SQQ."""
    return Loader(W, L, tags=tags // contexts, sqq_bytes=sqq_bytes // contexts, addr_bits=addr_bits, id_bits=id_bits)


class TileMux(wiring.Component):
    """Forwards the framed stream of the loader at the head of ``order`` (one-hot) until its
    ``last`` beat, then pops ``order``; a ``skip`` beat is consumed without being forwarded.
    ``order_copy`` is the same head from flip-flops of its own: it selects the ready, valid and pop
    terms, and ``order.payload`` the wide data, so that neither waits for the other's buffers."""

    def __init__(self, layout, loaders):
        super().__init__({
            "ins": In(stream.Signature(framed(layout))).array(loaders),
            "order": In(stream.Signature(loaders)),
            "order_copy": In(loaders),
            "out": Out(stream.Signature(layout)),
        })

    def elaborate(self, platform):
        m = Module()
        sel, data_sel = self.order_copy, self.order.payload
        # The head is one-hot: every output is an OR of the loaders' terms, not a chain of
        # multiplexers in loader order. The data follows ``data_sel`` alone (a register), not ``order.valid``.
        data, valid, pop = [], [], []
        for i, src in enumerate(self.ins):
            beat = src.payload
            moves = beat.skip | self.out.ready
            m.d.comb += src.ready.eq(self.order.valid & sel[i] & moves)
            data.append(Mux(data_sel[i], beat.data.as_value(), 0))
            valid.append(sel[i] & src.valid & ~beat.skip)
            pop.append(sel[i] & src.valid & moves & beat.last)
        m.d.comb += [
            self.out.payload.eq(reduce(operator.or_, data)),
            self.out.valid.eq(self.order.valid & reduce(operator.or_, valid)),
            self.order.ready.eq(self.order.valid & reduce(operator.or_, pop)),
        ]
        return m


class PE(wiring.Component):
    def __new__(cls, W, L, **params):
        check_pe_params(W, L, **params)  # before the component exists: nothing unused to warn about
        return super().__new__(cls)

    def __init__(self, W, L, *, tags=TAGS, sqq_bytes=SQQ_BYTES, addr_bits=48, id_bits=8, loaders=LOADERS,
                 contexts=CONTEXTS, tout_buffers=TOUT_BUFFERS):
        self.W, self.L, self.loaders, self.contexts = W, L, loaders, contexts
        self.tags, self.addr_bits, self.id_bits = tags, addr_bits, id_bits
        self.sqq_bytes = sqq_byte_count(sqq_bytes, W, L, contexts)
        self.tout_buffers = tout_buffer_count(tout_buffers, loaders)
        self.registers = registers(W=W, L=L, tag_bits=(tags - 1).bit_length(),
                                   sqq_log2=self.sqq_bytes.bit_length() - 1, id_bits=id_bits, loaders=loaders)
        super().__init__(pe_signature(tags=tags, addr_bits=addr_bits, id_bits=id_bits, loaders=loaders,
                                      contexts=contexts))

    def elaborate(self, platform):
        m = Module()
        squash = self.squash
        m.domains.datapath = datapath = ClockDomain("datapath", local=True)
        # Both without a reset of their own (or rst would clear them); ``ports_open`` is a second
        # copy (inverted, so that synthesis does not merge the two) for the ports, off the tree of
        # the datapath's reset.
        reset_copy, ports_open = Signal(reset_less=True), Signal(init=1, reset_less=True)
        m.d.sync += [reset_copy.eq(ResetSignal()), ports_open.eq(~ResetSignal())]
        m.d.comb += [datapath.clk.eq(ClockSignal()), datapath.rst.eq(reset_copy)]
        m.submodules.regs = regs = Control(self.registers)
        wiring.connect(m, wiring.flipped(self.cfg), regs.bus)
        # A Loader unit holds one tile: each loader is ``contexts`` of them, its tile contexts,
        # taking the port's requests in turn; below, ``loaders`` lists the contexts and ``per_port``
        # groups them by loader.
        n = self.contexts
        loaders = [tile_context(self.W, self.L, tags=self.tags, sqq_bytes=self.sqq_bytes, contexts=n,
                                addr_bits=self.addr_bits, id_bits=self.id_bits) for _ in range(self.loaders * n)]
        per_port = [loaders[p * n:(p + 1) * n] for p in range(self.loaders)]
        # Kept: a testbench watches the pipeline's output beside the PE's ports (tests/test_hw_pe.py).
        self.pipeline = pipeline = Pipeline(self.W, self.L)
        tout = TOut(self.W, self.id_bits, len(loaders), buffers=self.tout_buffers,
                    waiting=request_queue_entries(self.loaders) + 1)  # + 1: see ``TOut.room``
        m.submodules.pipeline = in_datapath(ResetInserter(squash)(pipeline))
        m.submodules.tout = in_datapath(ResetInserter(squash)(tout))
        wiring.connect(m, regs.cfg, pipeline.cfg)
        for i, loader in enumerate(loaders):
            m.submodules[f"loader{i}"] = in_datapath(loader)
            m.d.comb += [getattr(loader.mode, name).eq(getattr(regs.cfg, name)) for name in MODE_MEMBERS]

        def order_fifo(name):
            # One entry per TOut record at most: a request holds its record until it is completed,
            # after its last beats left the selectors (a context may take its next request while
            # its last beats still wait in its output registers). The head is a register
            # and one-hot, so that the selectors' choice is a flip-flop, and a pop only shifts.
            q = ShiftQueue(len(loaders), tout.slots)
            m.submodules[name] = in_datapath(ResetInserter(squash)(q))
            return q

        orders = {name: order_fifo(f"{name}_order") for name in ("vop", "value", "scale")}
        self._requests(m, loaders, orders, regs, tout, ports_open)
        self._pipeline_inputs(m, loaders, orders, pipeline)
        waiting_completion = self._completions(m, pipeline, tout, ports_open)
        self._memory(m, loaders, orders["value"], ports_open)
        self._status(m, per_port, orders, pipeline, regs,
                     busy=tout.busy | tout.accept | waiting_completion)
        return m

    def _requests(self, m, loaders, orders, regs, tout, ports_open):
        """The ports feed the request queue, a request a cycle (the lowest port wins a tie), while it
        and TOut's records have room; an accepted request is registered, and enters the queue, TOut's
        records and the prefetcher's view in the next cycle. The queue's head moves to the first idle tile context (of any loader), which
        is when its lines are demanded: the prefetcher sees that too, and the order FIFOs (the scale
        one only when scaling) learn the context. A context's failure marks the record of its
        request.

        ``ready`` comes from flip-flops alone, the same on every port: no input reaches it in its
        cycle (the SDC gives an input-to-output path no time). The tie and the squash act on what is
        taken instead: a port's request is taken when its ``valid`` and ``ready`` are high, no lower
        port's ``valid`` is, and ``squash`` is low. A request moved in a squash's cycle is dropped
        by the resets of everything it enters (context, order FIFOs, TOut) and not shown to the
        prefetcher, so ``squash`` does not gate the move: that kept the input on a path through the
        contexts' queue starts."""
        squash = self.squash
        request_layout = self.tepl_req[0].payload.shape()
        queue = RegisterQueue(request_layout, request_queue_entries(self.loaders))
        m.submodules.request_queue = in_datapath(ResetInserter(squash)(queue))
        # Each port's request is registered as it comes, and the one accepted (``taken``) enters
        # the queue, TOut's records and the prefetcher in the next cycle: no input reaches more than
        # a register. The ports' ``ready`` keeps a queue entry and a record (``TOut.room``) for it.
        held = [Signal(request_layout, name=f"request{p}") for p in range(self.loaders)]
        taken = Signal(self.loaders)
        pending, entry = Signal(), Signal(request_layout)
        depth = request_queue_entries(self.loaders)
        room = Mux(taken.any(), queue.level < depth - 1, queue.level < depth)
        ready = Signal()
        m.d.comb += ready.eq(room & tout.room & ports_open)
        valid_before = squash
        for p, port in enumerate(self.tepl_req):
            m.d.comb += port.ready.eq(ready)
            m.d.datapath += [held[p].eq(port.payload), taken[p].eq(port.valid & ready & ~valid_before)]
            valid_before = valid_before | port.valid
        for p in reversed(range(self.loaders)):
            with m.If(taken[p]):
                m.d.comb += entry.eq(held[p])
        # A squash drops it by resetting the queue and TOut (and the prefetcher does not see it).
        m.d.comb += [pending.eq(taken.any()), queue.w_en.eq(pending), queue.w_data.eq(entry),
                     tout.accept.eq(pending), tout.accept_id.eq(entry.id)]
        # Records and moves both follow acceptance order, so the request moving now has record
        # ``moved`` (counted mod slots).

        head = queue.r_data
        idle = [ld.idle for ld in loaders]
        move = Signal()
        m.d.comb += [move.eq(queue.r_rdy & Cat(idle).any()), queue.r_en.eq(move)]
        moved = Signal(range(tout.slots))
        with m.If(move):
            m.d.datapath += moved.eq(Mux(moved == tout.slots - 1, 0, moved + 1))
        with m.If(squash):
            m.d.datapath += moved.eq(0)
        which = Signal(len(loaders))  # the context the head moves to, one-hot
        for i, loader in enumerate(loaders):
            first_idle = ~Cat(idle[:i]).any()
            m.d.comb += [loader.req.valid.eq(move), loader.req.payload.eq(head), loader.squash.eq(squash),
                         loader.grant.eq(first_idle), which[i].eq(idle[i] & first_idle)]
        # The order FIFOs learn the context a cycle later, from registers (the move fans out
        # widely, and the FIFO's write logic is deep); its first beat is further off than that.
        scaling = regs.cfg.scale_format != ScaleFormat.NONE
        for name in ("vop", "value", "scale"):
            enter, entering = move & scaling if name == "scale" else move, Signal(name=f"{name}_entering")
            m.d.datapath += [entering.eq(enter & ~squash), orders[name].w_data.eq(which)]
            m.d.comb += orders[name].w_en.eq(entering)
        for i, loader in enumerate(loaders):
            # TOut's record of the context's request (a context announces a failure from the cycle
            # after its acceptance on).
            slot = Signal(range(tout.slots), name=f"slot{i}")
            with m.If(move & which[i]):
                m.d.datapath += slot.eq(moved)
            m.d.comb += [tout.fails[i].en.eq(loader.fails), tout.fails[i].reason.eq(loader.reason),
                         tout.fails[i].slot.eq(slot)]
        prefetcher = Prefetcher(self.addr_bits, self.id_bits, len(loaders))
        m.submodules.prefetcher = in_datapath(prefetcher)
        m.d.comb += [
            prefetcher.observe.eq(pending & ~squash),
            prefetcher.request.eq(entry),
            prefetcher.demand.eq(move & ~squash),
            prefetcher.demanded.eq(head),
            prefetcher.degree.eq(regs.degree),
        ]
        # Prefetches leave from registers, as the other outputs do (a squash leaves them alone);
        # the port's ready only moves the buffer's pointers.
        pf_req = OutputBuffer(self.pf_req.payload.shape())
        m.submodules.pf_req_reg = in_datapath(pf_req)
        wiring.connect(m, prefetcher.pf, pf_req.i)
        m.d.comb += [self.pf_req.payload.eq(pf_req.o.payload), self.pf_req.valid.eq(pf_req.o.valid & ports_open),
                     pf_req.o.ready.eq(self.pf_req.ready & ports_open)]

    def _pipeline_inputs(self, m, loaders, orders, pipeline):
        """The pipeline's three inputs, each following request order."""
        W, L = self.W, self.L
        for name, layout, order in (("vops", vop_layout(W), orders["vop"]),
                                    ("values", value_beat_layout(W, L), orders["value"]),
                                    ("scales", scale_beat_layout(), orders["scale"])):
            mux = TileMux(layout, len(loaders))
            m.submodules[f"{name}_mux"] = in_datapath(mux)
            m.d.comb += [mux.order.valid.eq(order.r_rdy), mux.order.payload.eq(order.r_data),
                         mux.order_copy.eq(order.r_copy), order.r_en.eq(mux.order.ready)]
            for i, loader in enumerate(loaders):
                wiring.connect(m, getattr(loader, name), mux.ins[i])
            # A register between the selectors and the pipeline, so that neither the order FIFOs'
            # selection nor the pipeline's ready reaches across in one cycle (one scale beat per
            # tile: its register needs no skid, and then the ready enables no data register).
            slice_ = RegisterSlice(layout, skid=name != "scales")
            m.submodules[f"{name}_reg"] = in_datapath(ResetInserter(self.squash)(slice_))
            wiring.connect(m, mux.out, slice_.i)
            wiring.connect(m, slice_.o, getattr(pipeline, name))

    def _completions(self, m, pipeline, tout, ports_open):
        """Chunks into TOut's buffer ring, completions in request order through the response
        register. A beat offered in a squash's cycle is not delivered (the core does not take it,
        and the squash resets the register), but ``squash`` does not gate ``valid``: no input
        reaches an output in its cycle; nor the register's ``ready``, whose next value
        (``resp_ready_next``) decides TOut's next ``chunks.ready``: the squash resets both anyway,
        and its wide fan-out would come before that decision. Returns: a beat is in that register."""
        wiring.connect(m, pipeline.out, tout.chunks)
        resp = OutputBuffer(tout.resp.payload.shape())
        m.submodules.tepl_resp_reg = in_datapath(ResetInserter(self.squash)(resp))
        wiring.connect(m, tout.resp, resp.i)
        m.d.comb += [
            # The port's ready (an input, in the second half of the cycle) selects between the
            # buffer's next ``i.ready`` for each of its values, computed from registers.
            tout.resp_ready_next.eq(resp.ready_next.bit_select(self.tepl_resp.ready & ports_open, 1)),
            self.tepl_resp.payload.eq(resp.o.payload),
            self.tepl_resp.valid.eq(resp.o.valid & ports_open),
            resp.o.ready.eq(self.tepl_resp.ready & ports_open),
        ]
        return resp.o.valid

    def _memory(self, m, loaders, value_order, ports_open):
        """Line reads: the context of the oldest request whose values are still to flow first, then
        the next ones in order (wrapping around); the tag's top bits name the context, whose
        responses they route back."""
        n = len(loaders)
        first = Mux(value_order.r_rdy, value_order.r_data, 1)  # one-hot
        valid = Cat(ld.line_req.valid for ld in loaders)
        # The pick, one-hot: after each ``first``, the first valid one in order; ORed as ``first``
        # selects. Only a valid one is picked, so the register takes a request whenever any is.
        pick, picks = Signal(n), []
        for f in range(n):
            after = Signal(n, name=f"pick_after{f}")
            for k in reversed(range(n)):
                with m.If(valid[(f + k) % n]):
                    m.d.comb += after.eq(1 << (f + k) % n)
            picks.append(Mux(first[f], after, 0))
        m.d.comb += pick.eq(reduce(operator.or_, picks))
        index = reduce(operator.or_, (Mux(pick[i], i, 0) for i in range(n)))
        # Requests leave from registers (the port's ready only moves the buffer's pointers); a
        # squash does not drop one there, nor one moving into it, since its tag-table entry waits
        # for the response (stale): a squash leaves the port alone.
        req = OutputBuffer(self.mem_req.payload.shape())
        m.submodules.mem_req_reg = in_datapath(req)
        m.d.comb += [
            req.i.valid.eq(valid.any()),
            req.i.payload.addr.eq(reduce(operator.or_, (Mux(pick[i], ld.line_req.payload.addr, 0)
                                                        for i, ld in enumerate(loaders)))),
            req.i.payload.tag.eq(Cat(reduce(operator.or_, (Mux(pick[i], ld.line_req.payload.tag, 0)
                                                           for i, ld in enumerate(loaders))), index)),
            self.mem_req.payload.eq(req.o.payload),
            self.mem_req.valid.eq(req.o.valid & ports_open),
            req.o.ready.eq(self.mem_req.ready & ports_open),
        ]
        # Responses enter a register first (every cycle: there is no ready), their tag decoded on
        # the way in: the context it names into one valid bit each, the loader's own tag into its
        # one-hot entry (zero in the other contexts). The data goes on to one realigner for every
        # context's queues, with the rotation of the queue the response is for.
        data_reg = Signal.like(self.mem_resp.payload.data, reset_less=True)
        realigner = LineRealigner()
        m.submodules.realigner = in_datapath(realigner)
        m.d.comb += [realigner.data.eq(data_reg),
                     realigner.digits.eq(reduce(operator.or_, (ld.line_digits for ld in loaders)))]
        entries = self.tags // self.contexts
        index_bits = (entries - 1).bit_length()
        tag = self.mem_resp.payload.tag
        resp_valid = Signal(n)
        m.d.datapath += [data_reg.eq(self.mem_resp.payload.data),
                         resp_valid.eq(Cat(self.mem_resp.valid & (tag[index_bits:] == i) for i in range(n)))]
        for i, loader in enumerate(loaders):
            entry = Signal(entries, name=f"resp_entry{i}")
            m.d.datapath += entry.eq(Cat(self.mem_resp.valid & (tag[index_bits:] == i) & (tag[:index_bits] == j)
                                         for j in range(entries)))
            m.d.comb += [
                loader.line_req.ready.eq(req.i.ready & pick[i]),
                loader.line_resp.valid.eq(resp_valid[i]),
                loader.line_resp.payload.tag.eq(entry),
                loader.line_rotated.eq(realigner.rotated),
            ]

    def _status(self, m, per_port, orders, pipeline, regs, busy):
        """Status, error record and performance counters; completions count as they leave the port
        (not in a squash's cycle, whose beat is not delivered). ``busy``: some accepted TEPL is not
        completed."""
        resp = self.tepl_resp
        offered = resp.valid & ~self.squash
        done = offered & resp.ready & resp.payload.last
        failed = resp.payload.error
        events = {
            "BUSY_CYCLES": busy,
            "VOPS": pipeline.vops.valid & pipeline.vops.ready,
            "BUBBLE_CYCLES": pipeline.bubble,
            "STARVE_CYCLES": pipeline.waiting & orders["vop"].r_rdy,
            "BACKPRESSURE_CYCLES": offered & ~resp.ready,
            "TILES": done & ~failed,
            "ERRORS": done & failed,
            "SQUASHES": self.squash,
            "LINES_DEMANDED": self.mem_req.valid & self.mem_req.ready,
            "LINES_PREFETCHED": self.pf_req.valid & self.pf_req.ready,
        }
        m.d.comb += [regs.events[COUNTER_INDEX[name]].eq(event) for name, event in events.items()]
        m.d.comb += [
            regs.status.eq(Cat(busy, [Cat(~ld.idle for ld in contexts).any()
                                      for contexts in per_port])),
            regs.error.en.eq(done & failed),
            regs.error.reason.eq(resp.payload.reason),
            regs.error.id.eq(resp.payload.id),
        ]
