"""Checks the PE's completions against the requests in flight."""

from collections import deque

from deca.golden.format import TILE_ROWS
from deca.hw.layouts import ErrorReason

from .bus import Mismatch


class Scoreboard:
    """Checks every completion beat against the requests in flight, in acceptance order."""

    def __init__(self):
        self.inflight = deque()  # [id, request, next row], in acceptance order
        self.gone = {}  # id -> why a beat with it is stale ("aborted" or "completed", and the label)
        self.completions = []  # (id, request) in completion order

    def accept(self, rid, request):
        self.inflight.append([rid, request, 0])
        self.gone.pop(rid, None)

    def abort(self):
        """Every request in flight is squashed; returns them."""
        for rid, request, _ in self.inflight:
            self.gone[rid] = f"aborted by a squash ({request.label})"
        aborted = [request for _, request, _ in self.inflight]
        self.inflight.clear()
        return aborted

    def beat(self, beat, cycle):
        """Check one completion beat (the unpacked tepl_resp payload); returns the request it completes, if any."""
        rid, row = beat["id"], beat["row"]
        if not self.inflight or self.inflight[0][0] != rid:
            raise Mismatch(f"cycle {cycle}: completion beat (id {rid}, row {row}) {self._stale(rid)}")
        head = self.inflight[0]
        _, request, want_row = head
        where = f"cycle {cycle}: {request.label} (id {rid})"
        if isinstance(request.expected, ErrorReason):
            if not beat["error"]:
                raise Mismatch(f"{where}: expected error {request.expected.name}, got data row {row}")
            if beat["reason"] != request.expected.value or not beat["last"] or beat["data"]:
                raise Mismatch(f"{where}: expected a single error beat with reason {request.expected.name}, last=1 "
                               f"and data 0; got reason {_reason(beat['reason'])}, last={beat['last']}, "
                               f"data {beat['data']:#x}")
        elif beat["error"]:
            raise Mismatch(f"{where}: expected tile data, got error {_reason(beat['reason'])} at row {want_row}")
        else:
            if row != want_row:
                raise Mismatch(f"{where}: got row {row}, expected row {want_row}")
            if beat["last"] != (row == TILE_ROWS - 1):
                raise Mismatch(f"{where}: row {row} has last={beat['last']}")
            want = request.expected[row]
            if beat["data"] != want:
                raise Mismatch(row_mismatch(where, row, beat["data"], want))
            head[2] = row + 1
            if not beat["last"]:
                return None
        self.inflight.popleft()
        self.gone[rid] = f"already completed ({request.label})"
        self.completions.append((rid, request))
        return request

    def _stale(self, rid):
        if self.inflight:
            first = self.inflight[0]
            order = f"request id {first[0]} ({first[1].label}) was accepted first and is not complete"
            later = next((r for i, r, _ in self.inflight if i == rid), None)
            if later is not None:
                return f"is out of order: it belongs to {later.label}, but {order}"
            return f"has an id not in flight, {self.gone.get(rid, 'never issued')}; {order}"
        return f"has an id not in flight, {self.gone.get(rid, 'never issued')}; nothing is in flight"

    def summary(self):
        return "in flight: " + (", ".join(f"id {rid} {request.label} (next row {row})"
                                          for rid, request, row in self.inflight) or "none")


def row_mismatch(where, row, got, want):
    """The message of a tile row ``got`` that differs from ``want`` (ints): the first element that differs."""
    diff = got ^ want
    e = ((diff & -diff).bit_length() - 1) // 16
    return f"{where}: row {row} element {e}: got {got >> 16 * e & 0xFFFF:#06x}, expected {want >> 16 * e & 0xFFFF:#06x}"


def _reason(value):
    try:
        return ErrorReason(value).name
    except ValueError:
        return f"invalid reason {value}"


