"""The documentation: the site builds strictly, every results table equals what its records render,
every `deca` command and option the documents name exists, every repository path they name exists."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from deca.cli import build_parser, main
from deca.docs import GENERATED_PAGES, KINDS, MARKER, TABLES, Records, cli_reference, documents, options, record, render, render_text, subparsers
from deca.errors import UsageError

ROOT = Path(__file__).resolve().parents[1]
DOCS = documents(ROOT)
TOP_FOLDERS = ("golden", "hw", "sim", "synth", "baseline", "deca", "tests", "scripts", "benchmarks", "docs")


def test_site_builds_strictly(tmp_path):
    """mkdocs.yml's validation turns a broken link or anchor and a page left out of the nav into
    warnings, which --strict makes fatal."""
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(tmp_path / "site")],
                            cwd=ROOT, capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "site" / "cli" / "index.html").is_file()
    assert (tmp_path / "site" / "pe" / "loaders" / "index.html").is_file()


def test_every_results_table_equals_its_records():
    stale = render(ROOT, check=True)
    assert not stale, f"tables differ from their records in {[str(p.relative_to(ROOT)) for p in stale]}: " \
                      "run 'deca docs render'"
    # The markers are used, and only known tables.
    names = {m.group(2) for path in DOCS for m in MARKER.finditer(path.read_text())}
    assert {"table4", "run", "sweep", "baseline", "golden", "synth"} <= names
    assert names <= set(TABLES)


def test_render_fills_a_stale_table_and_leaves_the_rest(tmp_path):
    text = "before\n<!-- results:table4 -->\n| typed | by hand |\n<!-- /results -->\nafter\n"
    records = Records(ROOT)
    out = render_text(text, records)
    assert "typed" not in out and out.startswith("before\n<!-- results:table4 -->\n") and out.endswith("after\n")
    assert "| density | MEM | TMUL | DECA |" in out and "docs/results/run/" in out
    assert render_text(out, records) == out
    with pytest.raises(UsageError, match="unknown results table 'nosuch'"):
        render_text("<!-- results:nosuch -->\n<!-- /results -->\n", records)
    # No records yet: the table says how to make them instead of showing numbers.
    empty = Records(tmp_path)
    assert "No records in `docs/results/run/` yet" in render_text(text, empty)


def test_record_copies_a_tools_output_and_stamps_it(tmp_path, capsys):
    (tmp_path / "mkdocs.yml").write_text("")
    source = tmp_path / "out" / "run"
    source.mkdir(parents=True)
    (source / "results.json").write_text("[]")
    (source / "settings.json").write_text("{}")
    main(["docs", "record", "run", str(source), "--root", str(tmp_path), "--commit", "abc1234"])
    meta = json.loads((tmp_path / "docs" / "results" / "run" / "meta.json").read_text())
    assert meta["commit"] == "abc1234" and meta["cpu"] and meta["command"].startswith("deca run")
    assert (tmp_path / "docs" / "results" / "run" / "results.json").read_text() == "[]"
    with pytest.raises(UsageError, match="lacks settings.json"):
        (source / "settings.json").unlink()
        record(tmp_path, "run", source)


def test_render_check_exits_1_on_a_stale_document(tmp_path):
    (tmp_path / "mkdocs.yml").write_text("")
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text("<!-- results:golden -->\nstale\n<!-- /results -->\n")
    with pytest.raises(SystemExit) as exc:
        main(["docs", "render", "--check", "--root", str(tmp_path)])
    assert exc.value.code == 1
    main(["docs", "render", "--root", str(tmp_path)])
    assert "No records in `docs/results/golden/` yet" in (tmp_path / "README.md").read_text()
    main(["docs", "render", "--check", "--root", str(tmp_path)])


def _code(text):
    """The code of a Markdown text: fenced blocks' lines and inline code spans."""
    blocks = re.findall(r"^```[^\n]*\n(.*?)^```", text, re.S | re.M)
    inline = re.findall(r"`([^`\n]+)`", re.sub(r"^```[^\n]*\n.*?^```", "", text, flags=re.S | re.M))
    return [line for block in blocks for line in block.splitlines()] + inline


def _deca_commands(text):
    """(command words, the rest of the line) of every `deca ...` written in the code of a text."""
    for line in _code(text):
        for m in re.finditer(r"(?<![\w./-])deca ((?:[a-z]+ ?)+)(.*)", line.split(" # ")[0]):
            words = m.group(1).split()
            yield words, " ".join(words) + " " + m.group(2)


def test_every_command_and_option_named_exists():
    parser = build_parser()
    commands = {words: sub for words, sub in subparsers(parser)}
    checked = 0
    for path in DOCS:
        for words, line in _deca_commands(path.read_text()):
            name = (words[0],)
            assert name in commands, f"{path.name}: 'deca {words[0]}' is not a deca command ({line!r})"
            if (*name, words[1] if len(words) > 1 else "") in commands:
                name = (*name, words[1])
            elif len(words) > 1 and any(len(k) == 2 and k[0] == name[0] for k in commands):
                pytest.fail(f"{path.name}: 'deca {' '.join(words)}' names no subcommand of 'deca {name[0]}'")
            known = options(commands[name])
            for option in re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", line):
                assert option in known, f"{path.name}: 'deca {' '.join(name)}' has no option {option} ({line!r})"
            checked += 1
    assert checked > 50


def test_cli_reference_is_every_commands_help():
    text = cli_reference()
    for words, sub in subparsers(build_parser()):
        assert f"deca {' '.join(words)}\n" in text
        for option in options(sub):
            assert option in text


def _links(text):
    return re.findall(r"\]\(([^)\s]+)\)", re.sub(r"^```.*?^```", "", text, flags=re.S | re.M))


def test_repository_paths_named_in_the_documents_exist():
    missing = []
    for path in DOCS:
        text = path.read_text()
        for link in _links(text):
            target = link.split("#")[0]
            if target and "://" not in target and target not in GENERATED_PAGES \
                    and not (path.parent / target).exists():
                missing.append(f"{path.relative_to(ROOT)}: link {link}")
        for span in re.findall(r"`([^`\s]+)`", text):
            span = span.split("::")[0]
            # A records folder exists once its measurement is recorded (the table says how until then).
            records_folder = re.fullmatch(r"docs/results/(\w+)/?", span)
            if records_folder and records_folder.group(1) in KINDS:
                continue
            if span.split("/")[0] in TOP_FOLDERS and "/" in span and not re.search(r"[<*{]", span):
                if not (ROOT / span).exists():
                    missing.append(f"{path.relative_to(ROOT)}: path {span}")
    assert not missing, "\n".join(missing)


def test_readme_and_pages_stay_short():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 400
    for path in (ROOT / "docs").rglob("*.md"):
        assert len(path.read_text().splitlines()) <= 600, f"{path.relative_to(ROOT)} is longer than 600 lines"


def test_synthesis_tables_come_from_the_synth_records(tmp_path):
    """A result as deca synth caches it, committed without a stamp: the tables show its numbers and
    say that the commit and machine are not recorded."""
    from deca.synth.flow import SynthResult
    from deca.synth.stats import BlockStats

    def block(area, power):
        return BlockStats(cells={}, flip_flops=10, memory_bits=0, modules=[], area=area, leakage_mw=power / 4,
                          dynamic_mw=3 * power / 4)

    result = SynthResult(top="deca_pe_w32_l8", design="pe", W=32, L=8, verilog_sha256="0", total=block(1000.0, 80.0),
                         blocks={"LUT array": block(600.0, 20.0), "loaders and queues": block(400.0, 60.0)},
                         seconds=1.0, tech="asap7", timing={"critical_ps": 398.0, "fmax_ghz": 2.51},
                         power={"frequency_ghz": 2.5, "activity": "vectorless: 0.1 toggles per cycle on every net"})
    folder = tmp_path / "docs" / "results" / "synth"
    folder.mkdir(parents=True)
    (folder / "deca_pe_w32_l8-0123.json").write_text(json.dumps(result.to_dict()))
    text = render_text("<!-- results:synth -->\n<!-- /results -->\n<!-- results:synth-blocks -->\n<!-- /results -->\n"
                       "<!-- results:synth-paper -->\n<!-- /results -->\n", Records(tmp_path))
    assert "| 32 | 8 | 2 | 1,000 | 0.06 | 10 | 0 | 398 | 2.51 | 80.0 |" in text
    assert "600 µm², 20.0 mW" in text and "400 µm², 60.0 mW" in text
    assert "| area share: LUT array | 60% | 22% |" in text and "| power of 56 PEs at 2.5 GHz | 4.48 W (vectorless: 0.1 toggles per cycle on every net) | 3.1 W |" in text
    assert text.count("are not recorded") == 3


def test_synthesis_power_table_sums_each_workload_and_the_per_block_maximum(tmp_path):
    """Two workloads over two blocks: each workload's whole-PE power is the sum of its blocks, the
    maximum takes each block's higher one (10 vs 12, 30 vs 20: 42), vectorless is leakage + dynamic."""
    from deca.synth.flow import SynthResult
    from deca.synth.stats import BlockStats

    def block(power):
        return BlockStats(cells={}, flip_flops=10, memory_bits=0, modules=[], area=1.0, leakage_mw=power / 4,
                          vectorless_dynamic_mw=3 * power / 4)

    workloads = [{"workload": "bf8@1 tepl, 256 tiles, seed 1: 87.9 cycles per tile", "cycles": 1, "named_nets": 1,
                  "blocks_mw": {"LUT array": 10.0, "loaders and queues": 30.0}},
                 {"workload": "bf8@0.05 tepl, 256 tiles, seed 1: 17.6 cycles per tile", "cycles": 1, "named_nets": 1,
                  "blocks_mw": {"LUT array": 12.0, "loaders and queues": 20.0}}]
    result = SynthResult(top="deca_pe_w32_l8", design="pe", W=32, L=8, verilog_sha256="0", total=block(80.0),
                         blocks={"LUT array": block(20.0), "loaders and queues": block(60.0)}, seconds=1.0,
                         tech="asap7", timing={"critical_ps": 398.0, "fmax_ghz": 2.51},
                         power={"frequency_ghz": 2.5, "activity": "simulated", "clock_gates": 3, "gated_flops": 40,
                                "gates_dropped": 1, "flops_ungated": 8, "workloads": workloads})
    folder = tmp_path / "docs" / "results" / "synth"
    folder.mkdir(parents=True)
    (folder / "deca_pe_w32_l8-0123.json").write_text(json.dumps(result.to_dict()))
    text = render_text("<!-- results:synth-power -->\n<!-- /results -->\n", Records(tmp_path))
    assert "| vectorless mW | bf8@1 mW | bf8@0.05 mW | maximum per block mW |" in text
    assert "| 32 | 8 | 2 | 3 (40) | 1 (8) | 80.0 | 40.0 | 32.0 | 42.0 |" in text
