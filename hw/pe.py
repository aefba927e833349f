"""The complete DECA PE (paper, Fig. 7 and 10; sections 5.2, 5.3 and 6.1).

    tepl_req[0] ─► Loader 0 (tags, queues, window) ─┐ vops, values, scales     ┌─► TOut 0 ─┐
                                                   ├─► TileMux ─► Pipeline ─┤            ├─► tepl_resp
    tepl_req[1] ─► Loader 1 (tags, queues, window) ─┘  (request order)        └─► TOut 1 ─┘
         mem_req / mem_resp ◄──► both loaders          pf_req ◄── Prefetcher
         cfg ◄──► Control (registers, counters)        squash ──► every in-flight TEPL

Every accepted request gets one entry in each order FIFO: the pipeline's three input selectors
and the completion logic follow request order through them. A squash resets the loaders' state,
the order FIFOs, the pipeline and the TOut flags in one cycle; the tag tables keep their entries
(stale) until the aborted lines come back, and the prefetcher and registers are untouched.
"""

from amaranth.hdl import Cat, Module, Mux, ResetInserter, Signal
from amaranth.lib import fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from .control import COUNTER_INDEX, Control, RegisterBusSignature
from .datapath import silence_unused
from .layouts import (ScaleFormat, mem_request_layout, mem_response_layout, prefetch_layout, scale_beat_layout,
                      tepl_request_layout, tepl_response_layout, value_beat_layout, vop_layout)
from .loader import Loader, LoaderState, framed
from .params import ParameterError, check_params
from .pipeline import Pipeline
from .prefetcher import Prefetcher
from .registers import registers
from .tout import BUFFERS, TOut

LOADERS = BUFFERS  # each loader owns a TOut buffer


def check_pe_params(W, L, tags, sqq_bytes, addr_bits, id_bits):
    check_params(W, L)
    if not isinstance(tags, int) or tags < 2 or tags > 256 or tags & (tags - 1):
        raise ParameterError(f"tags must be a power of two in 2..256 (tag-table entries per loader), got {tags!r}")
    if not isinstance(sqq_bytes, int) or sqq_bytes < 256 or sqq_bytes & (sqq_bytes - 1):
        raise ParameterError(f"sqq_bytes must be a power of two >= 256, got {sqq_bytes!r}")
    if not isinstance(addr_bits, int) or not 16 <= addr_bits <= 64:
        raise ParameterError(f"addr_bits must be in 16..64, got {addr_bits!r}")
    if not isinstance(id_bits, int) or not 1 <= id_bits <= 16:
        raise ParameterError(f"id_bits must be in 1..16, got {id_bits!r}")


class TileMux(wiring.Component):
    """Forwards the framed stream of the loader at the head of ``order`` until its ``last`` beat,
    then pops ``order``; a ``skip`` beat is consumed without being forwarded."""

    def __init__(self, layout):
        super().__init__({
            "ins": In(stream.Signature(framed(layout))).array(LOADERS),
            "order": In(stream.Signature(range(LOADERS))),
            "out": Out(stream.Signature(layout)),
        })

    def elaborate(self, platform):
        m = Module()
        sel = self.order.payload
        for i, src in enumerate(self.ins):
            with m.If(self.order.valid & (sel == i)):
                beat = src.payload
                m.d.comb += [
                    self.out.valid.eq(src.valid & ~beat.skip),
                    self.out.payload.eq(beat.data),
                    src.ready.eq(beat.skip | self.out.ready),
                    self.order.ready.eq(src.valid & (beat.skip | self.out.ready) & beat.last),
                ]
        return m


def mem_tag_bits(tags, loaders=LOADERS):
    """Width of a memory tag: the loader's tag-table entry, and above it the loader's number."""
    return (tags - 1).bit_length() + (loaders - 1).bit_length()


def pe_signature(*, tags=32, addr_bits=48, id_bits=8, loaders=LOADERS):
    """The PE's ports, which depend on neither W nor L (testbenches derive names and payloads from it)."""
    tag_bits = mem_tag_bits(tags, loaders)
    return wiring.Signature({
        "tepl_req": In(stream.Signature(tepl_request_layout(addr_bits, id_bits))).array(loaders),
        "tepl_resp": Out(stream.Signature(tepl_response_layout(id_bits))),
        "mem_req": Out(stream.Signature(mem_request_layout(addr_bits, tag_bits))),
        "mem_resp": In(stream.Signature(mem_response_layout(tag_bits), always_ready=True)),
        "pf_req": Out(stream.Signature(prefetch_layout(addr_bits))),
        "cfg": In(RegisterBusSignature()),
        "squash": In(1),
    })


class PE(wiring.Component):
    def __init__(self, W, L, *, tags=32, sqq_bytes=2048, addr_bits=48, id_bits=8):
        try:
            check_pe_params(W, L, tags, sqq_bytes, addr_bits, id_bits)
        except ParameterError:
            silence_unused(self)
            raise
        self.W, self.L = W, L
        self.tags, self.sqq_bytes, self.addr_bits, self.id_bits = tags, sqq_bytes, addr_bits, id_bits
        self.registers = registers(W=W, L=L, tag_bits=(tags - 1).bit_length(), sqq_log2=sqq_bytes.bit_length() - 1,
                                   id_bits=id_bits)
        super().__init__(pe_signature(tags=tags, addr_bits=addr_bits, id_bits=id_bits))

    def elaborate(self, platform):
        m = Module()
        W, L, squash = self.W, self.L, self.squash
        m.submodules.regs = regs = Control(self.registers)
        wiring.connect(m, wiring.flipped(self.cfg), regs.bus)
        cfg = regs.cfg

        loaders = [Loader(W, L, tags=self.tags, sqq_bytes=self.sqq_bytes, addr_bits=self.addr_bits,
                          id_bits=self.id_bits) for _ in range(LOADERS)]
        pipeline, tout = Pipeline(W, L), TOut(W, self.id_bits)
        m.submodules.pipeline = ResetInserter(squash)(pipeline)
        m.submodules.tout = ResetInserter(squash)(tout)
        m.submodules.prefetcher = prefetcher = Prefetcher(self.addr_bits, self.id_bits)
        wiring.connect(m, cfg, pipeline.cfg)

        def order_fifo(name):
            q = fifo.SyncFIFO(width=1, depth=LOADERS)  # one entry per loader at most
            m.submodules[name] = ResetInserter(squash)(q)
            return q

        vop_order, value_order, scale_order = order_fifo("vop_order"), order_fifo("value_order"), order_fifo("scale_order")
        pipe_order, resp_order = order_fifo("pipe_order"), order_fifo("resp_order")

        # Requests: each port feeds its loader; port 0 wins when both are taken in one cycle.
        for i, loader in enumerate(loaders):
            m.submodules[f"loader{i}"] = loader
            wiring.connect(m, wiring.flipped(self.tepl_req[i]), loader.req)
            m.d.comb += [
                loader.q.eq(cfg.q), loader.sparse.eq(cfg.sparse),
                loader.scale_format.eq(cfg.scale_format), loader.scale_group.eq(cfg.scale_group),
                loader.abort.eq(squash),
            ]
        m.d.comb += [
            loaders[0].grant.eq(1),
            loaders[1].grant.eq(~(self.tepl_req[0].valid & (loaders[0].state == LoaderState.IDLE))),
        ]
        accepted = [ld.req.valid & ld.req.ready for ld in loaders]
        which = accepted[1]
        scaling = cfg.scale_format != ScaleFormat.NONE
        for q in (vop_order, value_order, resp_order):
            m.d.comb += [q.w_en.eq(accepted[0] | accepted[1]), q.w_data.eq(which)]
        m.d.comb += [scale_order.w_en.eq((accepted[0] | accepted[1]) & scaling), scale_order.w_data.eq(which)]
        m.d.comb += [
            prefetcher.observe.eq(accepted[0] | accepted[1]),
            prefetcher.request.eq(Mux(which, self.tepl_req[1].payload, self.tepl_req[0].payload)),
            prefetcher.degree.eq(regs.degree),
        ]
        wiring.connect(m, prefetcher.pf, wiring.flipped(self.pf_req))

        # The pipeline's inputs, each following request order.
        muxes = {}
        for name, layout, order in (("vops", vop_layout(W), vop_order), ("values", value_beat_layout(W, L), value_order),
                                    ("scales", scale_beat_layout(), scale_order)):
            mux = muxes[name] = TileMux(layout)
            m.submodules[f"{name}_mux"] = mux
            wiring.connect(m, order.r_stream, mux.order)
            for i, loader in enumerate(loaders):
                wiring.connect(m, getattr(loader, name), mux.ins[i])
            wiring.connect(m, mux.out, getattr(pipeline, name))
        first_vop = pipeline.vops.valid & pipeline.vops.ready & (pipeline.vops.payload.index == 0)
        m.d.comb += [pipe_order.w_en.eq(first_vop), pipe_order.w_data.eq(vop_order.r_data)]

        # Output: chunks into the buffer of their tile's loader, completions in request order.
        wiring.connect(m, pipeline.out, tout.chunks)
        head = resp_order.r_data
        head_loader = lambda attr: Mux(head, getattr(loaders[1], attr), getattr(loaders[0], attr))
        m.d.comb += [
            tout.target.eq(pipe_order.r_data),
            pipe_order.r_en.eq(pipeline.out.valid & pipeline.out.ready & pipeline.out.payload.last),
            tout.head_valid.eq(resp_order.r_rdy),
            tout.head_buffer.eq(head),
            tout.head_id.eq(head_loader("id")),
            tout.head_failed.eq(head_loader("failed")),
            tout.head_reason.eq(head_loader("reason")),
            resp_order.r_en.eq(tout.done),
            [ld.release.eq(tout.done & (head == i)) for i, ld in enumerate(loaders)],
            self.tepl_resp.payload.eq(tout.resp.payload),
            self.tepl_resp.valid.eq(tout.resp.valid & ~squash),
            tout.resp.ready.eq(self.tepl_resp.ready & ~squash),
        ]

        # Memory: the loader of the older request goes first; the tag's top bit names the loader.
        first = Mux(resp_order.r_rdy, head, 0)
        pick = Mux(Mux(first, loaders[1].line_req.valid, loaders[0].line_req.valid), first, ~first)
        chosen = lambda f: Mux(pick, f(loaders[1].line_req), f(loaders[0].line_req))
        m.d.comb += [
            self.mem_req.valid.eq(chosen(lambda r: r.valid) & ~squash),
            self.mem_req.payload.addr.eq(chosen(lambda r: r.payload.addr)),
            self.mem_req.payload.tag.eq(Cat(chosen(lambda r: r.payload.tag), pick)),
        ]
        tag = self.mem_resp.payload.tag
        for i, loader in enumerate(loaders):
            m.d.comb += [
                loader.line_req.ready.eq(self.mem_req.ready & ~squash & (pick == i)),
                loader.line_resp.en.eq(self.mem_resp.valid & (tag[-1] == i)),
                loader.line_resp.tag.eq(tag[:-1]),
                loader.line_resp.data.eq(self.mem_resp.payload.data),
            ]

        # Status, error record and performance counters.
        events = {
            "BUSY_CYCLES": resp_order.r_rdy,
            "VOPS": pipeline.vops.valid & pipeline.vops.ready,
            "BUBBLE_CYCLES": pipeline.bubble,
            "STARVE_CYCLES": pipeline.waiting & vop_order.r_rdy,
            "BACKPRESSURE_CYCLES": self.tepl_resp.valid & ~self.tepl_resp.ready,
            "TILES": tout.done & ~tout.head_failed,
            "ERRORS": tout.done & tout.head_failed,
            "SQUASHES": squash,
            "LINES_DEMANDED": self.mem_req.valid & self.mem_req.ready,
            "LINES_PREFETCHED": self.pf_req.valid & self.pf_req.ready,
        }
        m.d.comb += [regs.events[COUNTER_INDEX[name]].eq(event) for name, event in events.items()]
        m.d.comb += [
            regs.status.eq(Cat(resp_order.r_rdy, [ld.state != LoaderState.IDLE for ld in loaders])),
            regs.error.en.eq(tout.done & tout.head_failed),
            regs.error.reason.eq(tout.head_reason),
            regs.error.id.eq(tout.head_id),
        ]
        return m
