"""The `deca compress / inspect / decompress / run` commands, in-process and through the installed script."""

import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from safetensors.numpy import save_file

from deca.cli import main
from deca.golden import SCHEMES, compress, decompress
from deca.golden.numerics import bf16_to_f32

CODEBOOK = "-2,-1,-0.5,0,0.5,1,2"


@pytest.fixture(scope="module")
def big_weights(tmp_path_factory):
    seed = 20251121  # fixed: the matrix is shared by every scheme below
    path = tmp_path_factory.mktemp("w") / "w.npy"
    w = np.random.default_rng(seed).standard_normal((1000, 3000)).astype(np.float32)
    np.save(path, w)
    return path, w


@pytest.mark.parametrize("scheme", list(SCHEMES))
def test_round_trip_every_scheme(tmp_path, capsys, big_weights, scheme):
    src, w = big_weights
    out = tmp_path / "w.deca"
    # `=` keeps argparse from reading a leading "-2" as an option.
    extra = [f"--codebook={CODEBOOK}"] if scheme == "codebook" else []
    density = [] if scheme in ("bf16", "ternary") else ["--density", "0.3"]
    assert main(["compress", str(src), "-o", str(out), "--scheme", scheme, *density, *extra]) == 0
    assert main(["inspect", str(out)]) == 0
    report = capsys.readouterr().out
    assert f"scheme       {scheme}:" in report and "1000 x 3000 (63 x 94 = 5922 tiles" in report

    kwargs = {"codebook": [float(v) for v in CODEBOOK.split(",")]} if scheme == "codebook" else {}
    cm = compress(w, scheme, density=0.3 if density else None, **kwargs)
    expected = decompress(cm)
    assert main(["decompress", str(out), "-o", str(tmp_path / "raw.npy"), "--raw"]) == 0
    assert np.array_equal(np.load(tmp_path / "raw.npy"), expected)
    assert main(["decompress", str(out), "-o", str(tmp_path / "w.npy")]) == 0
    got = np.load(tmp_path / "w.npy")
    assert got.dtype == np.float32 and got.shape == (1000, 3000)
    if scheme != "nvfp4":
        assert np.array_equal(got, bf16_to_f32(expected))
    else:  # the FP32 tensor scale is applied on top of the tile decode
        kept = np.where(cm.stored_mask(), w, 0)
        rel_rms = np.sqrt(np.mean((got - kept) ** 2) / np.mean(kept**2))
        assert rel_rms < 0.15 and not np.allclose(got, bf16_to_f32(expected), atol=0.5)


def test_inspect_reports_sizes_and_compression(tmp_path, capsys, rng):
    w = rng.standard_normal((64, 128)).astype(np.float32)
    np.save(tmp_path / "w.npy", w)
    main(["compress", str(tmp_path / "w.npy"), "-o", str(tmp_path / "w.deca"), "--scheme", "bf8", "--density", "0.5"])
    capsys.readouterr()
    main(["inspect", str(tmp_path / "w.deca")])
    text = capsys.readouterr().out
    # 16 tiles: 4096 values (1 byte each) + 16 x 64 mask bytes; paper factor 16 / (8 * 0.5 + 1) = 3.2.
    assert "values 4096, mask 1024, scales 0, total 5120" in text
    assert "bits/weight  5.000" in text and "paper formula 16/(Q*d+1) = 3.20x" in text


def test_inspect_uses_the_dense_formula_for_dense_matrices(tmp_path, capsys, rng):
    np.save(tmp_path / "w.npy", rng.standard_normal((16, 64)).astype(np.float32))
    main(["compress", str(tmp_path / "w.npy"), "-o", str(tmp_path / "w.deca"), "--scheme", "bf8"])
    capsys.readouterr()
    main(["inspect", str(tmp_path / "w.deca")])
    # Dense has no mask bit: the paper's factor is 16/Q = 16/8.
    assert "paper formula 16/Q = 2.00x" in capsys.readouterr().out


@pytest.mark.parametrize("container", ["npz", "safetensors-f32", "safetensors-bf16"])
def test_named_tensor_inputs(tmp_path, rng, container):
    w = rng.standard_normal((40, 70)).astype(np.float32)
    other = np.zeros((3, 3), np.float32)
    if container == "npz":
        src = tmp_path / "m.npz"
        np.savez(src, **{"layer.0.weight": w, "bias": other})
    else:
        src = tmp_path / "m.safetensors"
        dtype = ml_dtypes.bfloat16 if container.endswith("bf16") else np.float32
        w = w.astype(dtype).astype(np.float32)  # BF16 weights are exactly representable in float32
        save_file({"layer.0.weight": w.astype(dtype), "bias": other.astype(dtype)}, str(src))
    out = tmp_path / "w.deca"
    assert main(["compress", str(src), "--tensor", "layer.0.weight", "-o", str(out), "--scheme", "bf16"]) == 0
    main(["decompress", str(out), "-o", str(tmp_path / "back.npy")])
    assert np.array_equal(np.load(tmp_path / "back.npy"), bf16_to_f32(decompress(compress(w, "bf16"))))


@pytest.mark.parametrize("args, message", [
    (["compress", "{d}/absent.npy", "-o", "{d}/o.deca", "--scheme", "bf8"], "no such weight file"),
    (["compress", "{d}/m.npz", "-o", "{d}/o.deca", "--scheme", "bf8"], "holds 2 tensors; name one with --tensor"),
    (["compress", "{d}/m.npz", "--tensor", "nope", "-o", "{d}/o.deca", "--scheme", "bf8"], "has no tensor named 'nope'"),
    (["compress", "{d}/m.safetensors", "--tensor", "nope", "-o", "{d}/o.deca", "--scheme", "bf8"],
     "has no tensor named 'nope'; it has: a, b"),
    (["compress", "{d}/v.npy", "-o", "{d}/o.deca", "--scheme", "bf8"], "must be 2-D"),
    (["compress", "{d}/m.txt", "-o", "{d}/o.deca", "--scheme", "bf8"], "unsupported weight file type '.txt'"),
    (["compress", "{d}/a.npy", "-o", "{d}/o.deca", "--scheme", "int4", "--density", "2"], "density must be"),
    (["inspect", "{d}/a.npy"], "not a .deca file"),
    (["decompress", "{d}/absent.deca", "-o", "{d}/o.npy"], "No such file"),
])
def test_errors_exit_2_with_a_message(tmp_path, capsys, args, message):
    np.savez(tmp_path / "m.npz", a=np.zeros((2, 2)), b=np.zeros((2, 2)))
    save_file({"a": np.zeros((2, 2), np.float32), "b": np.zeros((2, 2), np.float32)}, str(tmp_path / "m.safetensors"))
    np.save(tmp_path / "v.npy", np.zeros(4, np.float32))
    np.save(tmp_path / "a.npy", np.zeros((2, 2), np.float32))
    (tmp_path / "m.txt").write_text("1 2\n")
    with pytest.raises(SystemExit) as exit_info:
        main([a.format(d=tmp_path) for a in args])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_run_main_job_is_bit_exact(capsys):
    assert main(["roundtrip", "--shape", "40x100", "--seed", "7", "--schemes", "mxfp4,int4,ternary",
                 "--densities", "1,0.2"]) == 0
    out = capsys.readouterr().out
    assert "seed 7" in out and "all 5 configurations bit-exact" in out


def test_console_script_is_installed(tmp_path):
    deca = Path(sys.executable).with_name("deca")
    np.save(tmp_path / "w.npy", np.ones((16, 32), np.float32))
    done = subprocess.run([deca, "compress", tmp_path / "w.npy", "-o", tmp_path / "w.deca", "--scheme", "int8"],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    done = subprocess.run([deca, "inspect", tmp_path / "nope.deca"], capture_output=True, text=True, check=False)
    assert done.returncode == 2 and "deca inspect: error:" in done.stderr


def test_subcommands_import_only_what_they_need(tmp_path):
    """Without cocotb (a model- or synthesis-only install) every parser builds and the model runs."""
    code = ("import sys\n"
            "sys.modules['cocotb'] = sys.modules['cocotb_tools'] = None\n"
            "from deca.cli import build_parser, main\n"
            "build_parser()\n"
            "main(['model', 'table'])\n"
            "assert 'deca.sim.bench.runner' not in sys.modules\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "BF8_5%" in run.stdout
