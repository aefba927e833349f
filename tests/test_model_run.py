"""`deca run --model`: sampled tiles of a compressed checkpoint's layers, the per-layer table and
the comparison of the actual masks with the random-mask (binomial) bubble model."""

import json

import numpy as np
import pytest
from safetensors.numpy import save_file

from deca.cli import main
from deca.golden import compress, decompress_tile
from deca.golden.checkpoint import layer_paths
from deca.sim.measure.layers import deviations, layer_samples, layer_table, sample_tiles
from deca.sim.model.bubbles import bpv_expected


@pytest.mark.parametrize("scheme, group_size", [("bf8", None), ("int4", 128), ("nvfp4", None), ("bf16", None)])
def test_sampled_tiles_decode_like_the_originals(rng, scheme, group_size):
    w = rng.standard_normal((70, 300)).astype(np.float32)
    cm = compress(w, scheme, density=0.3, group_size=group_size)
    picked = np.sort(rng.choice(cm.num_tiles, 9, replace=False))
    sample = sample_tiles(cm, picked)
    assert sample.shape == (16, 32 * 9) and sample.num_tiles == 9 and sample.tensor_scale == cm.tensor_scale
    for i, t in enumerate(picked):
        assert sample.tile_streams(i) == cm.tile_streams(t)
        np.testing.assert_array_equal(decompress_tile(*sample.tile_streams(i), sample.config),
                                      decompress_tile(*cm.tile_streams(t), cm.config))
    if cm.scale_blocks is not None:
        # Tiles that shared a scale block in the layer share one in the sample, and only they.
        same = cm.scale_block_of_tile[picked][:, None] == cm.scale_block_of_tile[picked][None, :]
        np.testing.assert_array_equal(sample.scale_block_of_tile[:, None] == sample.scale_block_of_tile[None, :], same)


def compressed_model(tmp_path, rng, capsys):
    layers = {"a.weight": rng.standard_normal((64, 256)).astype(np.float32),
              "b.weight": rng.standard_normal((32, 96)).astype(np.float32)}
    save_file(layers, str(tmp_path / "m.safetensors"))
    assert main(["compress", str(tmp_path / "m.safetensors"), "-o", str(tmp_path / "c"), "--scheme", "bf8",
                 "--density", "0.2"]) == 0
    capsys.readouterr()
    return tmp_path / "c"


def test_layer_samples_are_seeded_and_bounded(tmp_path, rng, capsys):
    model = compressed_model(tmp_path, rng, capsys)
    first = layer_samples(model, None, 12, seed=5, folder=tmp_path / "s1")
    again = layer_samples(model, "", 12, seed=5, folder=tmp_path / "s2")
    assert [(r["name"], p.read_bytes(), n) for r, p, n in first] == [(r["name"], p.read_bytes(), n) for r, p, n in again]
    assert [n for _, _, n in first] == [32, 6]  # tiles per layer: 4 x 8 and 2 x 3
    only_b = layer_samples(model, r"^b\.", 12, seed=5, folder=tmp_path / "s3")
    assert [r["name"] for r, _, _ in only_b] == ["b.weight"]
    from deca.golden import load
    assert load(only_b[0][1]).num_tiles == 6  # fewer tiles than asked: all of them


def test_layer_table_weights_layers_by_tiles_and_names_deviations(tmp_path, rng, capsys):
    model = compressed_model(tmp_path, rng, capsys)
    samples = layer_samples(model, None, 4, seed=1, folder=tmp_path / "s")
    W, L = 8, 4
    random = {row["name"]: bpv_expected(W, L, 8, True, row["density"]) for row, _, _ in samples}
    # Synthetic records: layer a's masks far above the binomial, layer b's on it.
    masks = {"a.weight": random["a.weight"] + 0.5, "b.weight": random["b.weight"]}
    records = [{"workload": str(path), "mode": mode, "tiles": 4, "cycles_per_tile": cpt,
                "predicted_cycles_per_tile": 20.0, "bpv_measured": masks[row["name"]], "bpv_masks": masks[row["name"]]}
               for row, path, _ in samples for mode, cpt in (("tepl", 30.0 if row["name"] == "a.weight" else 60.0),
                                                             ("store", 70.0))]
    rows, total = layer_table(samples, records, W, L)
    assert [r["bpv_random"] for r in rows] == [random["a.weight"], random["b.weight"]]
    assert [r["name"] for r in deviations(rows)] == ["a.weight"]
    # 32 and 6 tiles: the model-wide numbers weight the layers by them.
    assert total["tepl"] == pytest.approx((32 * 30 + 6 * 60) / 38)
    assert total["deviation"] == pytest.approx(32 * 0.5 / 38)
    assert rows[1]["ratio"] == 1.0 and rows[0]["ratio"] == pytest.approx(1 + 0.5 / random["a.weight"])


def test_bad_requests_exit_2(tmp_path, rng, capsys):
    model = compressed_model(tmp_path, rng, capsys)
    for args, message in [
        (["--layers", "nothing-matches"], "no finished layer"),
        (["--layers", "("], "--layers: not a regular expression"),
        (["--tiles-per-layer", "0"], "--tiles-per-layer must be a positive number"),
        (["--matrix", str(layer_paths(model, "a.weight")[0])], "give --matrix or --model, not both"),
    ]:
        with pytest.raises(SystemExit) as exit_info:
            main(["run", "--model", str(model), "--out", str(tmp_path / "run"), *args])
        assert exit_info.value.code == 2 and message in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["run", "--model", str(tmp_path / "absent"), "--out", str(tmp_path / "run")])
    assert "not a compressed checkpoint (no manifest.json)" in capsys.readouterr().err


def test_layers_measured_on_the_rtl(tmp_path, rng, capsys):
    model = compressed_model(tmp_path, rng, capsys)
    out = tmp_path / "run"
    assert main(["run", "--W", "8", "--L", "4", "--model", str(model), "--tiles-per-layer", "8", "--out", str(out),
                 "--jobs", "1"]) == 0
    text = capsys.readouterr().out
    assert "model (2 layers)" in text and "38 in all" in text
    rows = {r["name"]: r for r in _csv(out / "layers.csv")}
    for name in ("a.weight", "b.weight"):
        row = rows[name]
        # The PE's bubble counter matches the expectation over the sample's own masks exactly.
        assert float(row["bpv"]) == pytest.approx(float(row["bpv_masks"]), abs=1e-12)
        assert float(row["tepl"]) > 0 and float(row["store"]) > float(row["tepl"]) * 0.5
        assert float(row["bpv_random"]) == pytest.approx(bpv_expected(8, 4, 8, True, float(row["density"])))
    points = sorted(p.name for p in (out / "points").glob("*.json"))
    assert len(points) == 4 and all(json.loads((out / "points" / p).read_text())["tiles"] in (6, 8) for p in points)


def _csv(path):
    import csv
    with open(path, newline="") as f:
        return list(csv.DictReader(f))
