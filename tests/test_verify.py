"""``deca verify``: a block of the constrained-random regression on the fast engine (W = 8, L = 4, the
Verilator build the other RTL tests share) is clean, reproducible from its seed and block alone,
and fails naming the request when a tile is wrong or a batch runs out of cycles; blocks merge; the
coverage bins; bad input."""

import numpy as np
import pytest

from deca.cli import main
from deca.hw.layouts import ErrorReason
from deca.sim.bench.engine import EVENTS
from deca.sim.verify import coverage, regression
from deca.sim.verify.cli import blocks_of
from deca.sim.verify.mutants import MUTANTS, mutated_source

W, L, LOADERS = 8, 4, 2
REQUESTS = 60


@pytest.fixture(scope="module")
def bus():
    bus = regression.open_bus(W, L, LOADERS)
    yield bus
    bus.close()


def test_a_block_is_clean_and_the_same_from_its_seed_and_index_alone(bus, seed):
    print(f"seed {seed}")
    first = regression.run_block(W, L, LOADERS, seed, 3, REQUESTS, bus=bus)
    assert first["failures"] == [] and first["mismatches"] == first["hangs"] == 0
    assert first["requests"] == first["tiles"] + first["errors"] == REQUESTS and first["cycles"] > 0
    assert set(first["bins"]) <= set(coverage.declared(LOADERS)), set(first["bins"]) - set(coverage.declared(LOADERS))
    assert first["bins"].get("mode/tepl", 0) + first["bins"].get("mode/store", 0) >= 1  # a block may be all store
    other = regression.run_block(W, L, LOADERS, seed, 4, REQUESTS, bus=bus)
    again = regression.run_block(W, L, LOADERS, seed, 3, REQUESTS, bus=bus)  # after another block: the same
    assert again == first
    merged = regression.merge([other, first])
    assert merged["blocks"] == [3, 4] and merged["requests"] == 2 * REQUESTS
    assert all(merged["bins"][b] == first["bins"].get(b, 0) + other["bins"].get(b, 0) for b in merged["bins"])


@pytest.mark.parametrize("tiles", [REQUESTS, REQUESTS // 2], ids=["full block", "short last block"])
def test_a_wrong_golden_tile_fails_naming_its_request(bus, seed, monkeypatch, tiles):
    """The expected rows of one request of the first batch changed: a mismatch at that request's index
    in the run (blocks of ``REQUESTS``), also in a run's last block when it is shorter."""
    block, draw = 2, regression.draw_batch
    batch, _, _ = draw(seed, block, 0, W, LOADERS)
    target = next(k for k, r in enumerate(batch.requests) if not isinstance(r.expected, ErrorReason))

    def wrong(*args, **kwargs):
        batch, settings, rng = draw(*args, **kwargs)
        if args[2] == 0:
            # Without squashes: a squashed TEPL that is not reissued delivers no tile to compare.
            settings["squash"] = {}
            r = batch.requests[target]
            r.expected = (r.expected[0] ^ 1, *r.expected[1:])
        return batch, settings, rng

    monkeypatch.setattr(regression, "draw_batch", wrong)
    assert target < tiles
    rec = regression.run_block(W, L, LOADERS, seed, block, tiles, bus=bus, block_tiles=REQUESTS)
    assert rec["mismatches"] == 1 and rec["hangs"] == 0, rec["failures"]
    (failure,) = rec["failures"]
    assert failure["kind"] == "Mismatch" and failure["tile"] == block * REQUESTS + target, failure
    assert failure["batch"] == 0 and regression.batch_of(seed, block, tiles, target, W, LOADERS) == 0


def test_a_batch_past_its_cycle_budget_is_a_hang(bus, seed, monkeypatch):
    monkeypatch.setattr(regression, "CYCLES_PER_REQUEST", 1)
    monkeypatch.setattr(regression, "BUDGET_LATENCIES", 0)
    rec = regression.run_block(W, L, LOADERS, seed, 0, 10, bus=bus)
    assert rec["hangs"] >= 1 and rec["failures"][0]["kind"] == "Hang", rec["failures"]
    assert "cycles" in rec["failures"][0]["message"]


def test_coverage_bins_are_declared_once_and_the_engine_events_map_onto_them():
    for loaders in (2, 3, 4):
        bins = coverage.declared(loaders)
        assert len(bins) == len(set(bins))
        # every event once, a squash only as it can happen: in flight iff in the data phases
        possible = {name: int(not name.startswith("squash_") or (name.endswith("_0") == ("idle" in name or
                                                                                       "presented" in name)))
                    for name in EVENTS}
        hits = coverage.engine_hits(possible, loaders)
        assert set(hits) <= set(bins), set(hits) - set(bins)
        assert f"error/VALUE_LEN/port{loaders - 1}" in hits and "squash/mid_tile/more" in hits
    assert coverage.report({}, 2)[:2] == (0, len(coverage.declared(2)))
    hit, total, missed, percent = coverage.report({"bits/4": 3, "mode/tepl": 1, "not/a/bin": 5}, 2)
    assert hit == 2 and len(missed) == total - 2 and percent == pytest.approx(200 / total)
    assert [coverage.density_bucket(n, False) for n in (0, 51, 52, 511, 512)] == ["empty", "le10", "le30", "lt100",
                                                                                 "full"]


def test_blocks_cover_the_run():
    assert blocks_of(5, 2) == [(0, 2), (1, 2), (2, 1)]
    assert sum(n for _, n in blocks_of(1_000_000, 2000)) == 1_000_000


def _first_tile_bin(batch, settings):
    """The tile bin of the first tile of ``batch`` (failing or not for a CONFIG.Q; not a malformed request)."""
    tile = next(r for r in batch.requests
                if r.expected is ErrorReason.CONFIG or not isinstance(r.expected, ErrorReason))
    stored = int(np.unpackbits(np.frombuffer(tile.mask, np.uint8)).sum())
    return f"tile/{settings['scheme']}/{coverage.density_bucket(stored, not tile.mask)}/{settings['group']}"


def test_the_first_batches_of_a_block_reach_every_tile_cross_in_order(seed):
    """Batch i of a block is drawn for its place in the schedule: its first tile is in that cross
    (the mask in the bucket, no ternary weight quantized to zero), and a block's first batches,
    one per cross, reach them all."""
    crosses = [b for b in coverage.declared(LOADERS) if b.startswith("tile/")]
    firsts = []
    for index in range(len(crosses)):
        batch, settings, _ = regression.draw_batch(seed, 3, index, W, LOADERS)
        scheme, bucket, group = regression.schedule(seed, 3, index)
        firsts.append(_first_tile_bin(batch, settings))
        assert firsts[-1] == f"tile/{scheme}/{bucket}/{group}", (index, firsts[-1])
    assert sorted(firsts) == sorted(crosses)


def test_any_number_of_blocks_start_spread_over_the_schedule(seed):
    """Blocks 0..2^k - 1 start 1/2^k of the walk apart: their first n/2^k + 1 batches reach every cross."""
    crosses = coverage.tile_crosses()
    for blocks in (1, 2, 8, 64):
        reached = {regression.schedule(seed, b, i) for b in range(blocks) for i in range(len(crosses) // blocks + 1)}
        assert reached == set(crosses), blocks


@pytest.mark.parametrize("args,message", [
    (["--tiles", "0"], "--tiles must be a positive number of requests, got 0"),
    (["--tiles", "-5"], "--tiles must be a positive number of requests, got -5"),
    (["--cover-min", "101"], "--cover-min must be a percentage in 0..100, got 101"),
    (["--cover-min", "-1"], "--cover-min must be a percentage in 0..100, got -1"),
    (["--W", "12"], "W must be one of 8, 16, 32, 64"),
    (["--W", "8", "--L", "16"], "L = 16 LUTs exceeds W = 8"),
    (["--loaders", "5"], "loaders must be one of 2, 3, 4"),
    (["--tiles", "10", "--replay", "10"], "--replay must name a request of the run, 0..9, got 10"),
    (["--mutant", "no_such_fault"], "unknown mutant 'no_such_fault'; choose from prefix_off_by_one"),
])
def test_bad_input_is_one_line_and_exit_2(args, message, capsys, tmp_path):
    with pytest.raises(SystemExit) as e:
        main(["verify", *args, "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert e.value.code == 2 and message in err and err.count("\n") == 1, err


@pytest.mark.parametrize("name", list(MUTANTS))
def test_every_mutant_changes_its_module_at_one_place(name):
    module, old, new, _ = MUTANTS[name]
    source = mutated_source(name)
    assert new in source and source.replace(new, old, 1) != source


@pytest.mark.slow  # a Verilator build of each mutant (minutes each)
@pytest.mark.parametrize("name", list(MUTANTS))
def test_each_mutant_is_killed_within_10000_requests(name, capsys, tmp_path):
    main(["verify", "--W", str(W), "--L", str(L), "--tiles", "10000", "--block-tiles", "500", "--seed", "1",
          "--mutant", name, "--out", str(tmp_path)])
    assert f"mutant {name} killed at request" in capsys.readouterr().out


@pytest.mark.slow  # the W = 32, L = 8 fast engine, and 6,000 requests (about 20 CPU s)
def test_w32l8_seed1_blocks_with_long_waits_run_clean():
    """The blocks of ``deca verify --W 32 --L 8 --seed 1`` (2,000 requests each) with a demand read
    queued behind prefetched lines for over the watchdog's cycles (requests 13,110 and 29,514) and a
    squash storm past the budget of its requests counted once (request 9,792): no hang, no mismatch."""
    bus = regression.open_bus(32, 8, LOADERS)
    try:
        records = [regression.run_block(32, 8, LOADERS, 1, block, 2000, bus=bus) for block in (4, 6, 14)]
    finally:
        bus.close()
    run = regression.merge(records)
    assert run["hangs"] == run["mismatches"] == 0 and run["requests"] == 6000, run["failures"]
