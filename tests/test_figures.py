"""`toy-rl figures`: every notebook's key plot in smoke mode (into tmp_path, never docs/figures), the captions
and index beside them, bad input, and the committed full figures in docs/figures."""
import json
from pathlib import Path

import pytest

from toy_rl.cli import main
from toy_rl.report.figures import DOCS_FIGURES, FIGURES, render_figures, select
from toy_rl.report.runs import llm_missing

ROOT = Path(__file__).resolve().parents[1]
FAST = [name for name in FIGURES if not name.startswith("06")]      # 06 needs the llm extra and SmolLM2


@pytest.fixture(scope="module")
def smoke_figures(tmp_path_factory):
    out = tmp_path_factory.mktemp("figures")
    entries = render_figures(FAST, out, smoke=True, runs=out / "runs", progress=False)
    return out, entries


def test_smoke_figures_are_small_pngs_with_captions(smoke_figures):
    out, entries = smoke_figures
    assert [e["name"] for e in entries] == FAST
    for e in entries:
        png = out / e["file"]
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert 5_000 < png.stat().st_size == e["bytes"] <= 100_000
        assert e["smoke"] and e["caption"].startswith("SMOKE VERSION")
        assert all(e[part] in e["caption"] for part in ("what", "config", "source", "machine", "date"))
        assert e["command"] == f"toy-rl figures --only {e['name']} --out {out} --smoke"
    captions = json.loads((out / "captions.json").read_text())
    assert list(captions) == FAST
    index = (out / "README.md").read_text()
    assert all(f"]({name}.png)" in index for name in FAST)
    # the rung-2 figures ran the runner into the smoke runs folder, with the smoke config named as such
    assert "SMOKE" in captions["04-arithmetic-rules"]["config"]
    assert (out / "runs" / "compare" / "long-failures-smoke" / "lag-8" / "bapo").is_dir()
    assert all("Regime" in captions[name]["what"] for name in ("02-bandit-rules", "04-arithmetic-rules"))


def test_only_redraws_some_and_keeps_the_others(smoke_figures, tmp_path):
    out, _ = smoke_figures
    copy = tmp_path / "figs"
    copy.mkdir()
    (copy / "captions.json").write_text((out / "captions.json").read_text())
    entries = render_figures(["00"], copy, smoke=True, runs=tmp_path / "runs", progress=False)
    assert [e["name"] for e in entries] == ["00-clipping"]
    assert list(json.loads((copy / "captions.json").read_text())) == FAST        # the others' entries kept


def test_rerun_reads_the_finished_rung2_runs_back(smoke_figures):
    out, _ = smoke_figures
    again = render_figures(["04"], out, smoke=True, runs=out / "runs", progress=False)[0]
    assert again["source"].startswith("loaded from")


def test_lora_figure_smoke_on_a_tiny_model(tmp_path):
    """The real SmolLM2 path takes ~20-30 s here (three model loads); the same runner and view on a tiny random
    Llama take a second or two (tests/test_lm_run.py and test_lm_smollm2.py check the real model)."""
    lm = pytest.importorskip("test_lm_run", reason="the LoRA figure needs the llm extra (transformers, peft)")
    e = render_figures(["06"], tmp_path, smoke=True, runs=tmp_path / "runs", progress=False, model=lm.tiny_llama)[0]
    assert "skipped" not in e, e
    assert (tmp_path / "06-lora-rules.png").stat().st_size > 5_000
    assert "SMOKE" in e["config"] and "toy_rl.experiments.sweep" in e["source"]



def test_the_rung3_key_figure_reads_the_committed_comparison(tmp_path):
    """In full mode figure 06 is rung 3's comparison where negatives dominate, read back from its logs in results/
    (nothing trained, no model loaded): its caption's accuracies and run count recomputed from those logs."""
    from toy_rl.arithmetic.comparison import from_logs
    from toy_rl.course.logs import run_folders
    from toy_rl.report.rungs import HARD, HARD_RUNS
    [e] = render_figures(["06"], tmp_path, smoke=False, runs=tmp_path / "runs", progress=False)
    result, landed = from_logs(ROOT / "results" / HARD), len(run_folders(ROOT / "results" / HARD))
    assert "search-hard-warm" in e["what"] and e["source"].startswith(f"results/{HARD}")
    assert all(f"{r['rule']} {r['auc_accuracy']:.3f}" in e["what"] for r in result["rows"])
    assert (f"Interim: {landed} of the {HARD_RUNS} runs" in e["what"]) == (landed < HARD_RUNS)
    assert not (tmp_path / "runs").exists()                                  # nothing trained
    committed = json.loads((ROOT / DOCS_FIGURES / "captions.json").read_text())["06-lora-rules"]
    assert committed["what"] == e["what"], "redraw: toy-rl figures --only 06-lora-rules --overwrite"   # as runs land

@pytest.mark.skipif(llm_missing() is None, reason="the llm extra and SmolLM2 are installed here")
def test_lora_figure_is_skipped_with_a_reason_without_the_llm_extra(tmp_path):
    [e] = render_figures(["06"], tmp_path, smoke=True, runs=tmp_path / "runs", progress=False)
    assert e["skipped"] == llm_missing() and not (tmp_path / "06-lora-rules.png").exists()


def test_bad_input_fails_clearly(tmp_path, capsys):
    with pytest.raises(ValueError, match="unknown figure '99'"):
        select(["99"])
    with pytest.raises(ValueError, match="never go to docs/figures"):
        render_figures(["00"], DOCS_FIGURES, smoke=True)
    assert main(["figures", "--only", "nope", "--out", str(tmp_path)]) == 2
    assert "unknown figure 'nope'" in capsys.readouterr().err
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    assert main(["figures", "--smoke", "--only", "00", "--out", str(blocker / "sub")]) == 2
    assert "--out: cannot create" in capsys.readouterr().err


def test_cli_writes_and_prints_json(tmp_path, capsys):
    assert main(["figures", "--smoke", "--only", "00", "01", "--out", str(tmp_path), "--json"]) == 0
    entries = json.loads(capsys.readouterr().out)
    assert [e["name"] for e in entries] == ["00-clipping", "01-entropy-rule"]
    assert all((tmp_path / e["file"]).is_file() for e in entries)


def test_committed_figures_are_full_small_and_captioned():
    folder = ROOT / DOCS_FIGURES
    captions = json.loads((folder / "captions.json").read_text())
    assert set(captions) == set(FIGURES)
    for name, e in captions.items():
        assert not e["smoke"] and "SMOKE" not in e["caption"], name
        assert "NOT the default full configuration" not in e["config"], name
        assert (folder / e["file"]).stat().st_size == e["bytes"] <= 100_000
    readme = (ROOT / "README.md").read_text()
    assert all(f"docs/figures/{e['file']}" in readme for e in captions.values())
    guide = (ROOT / "notebooks" / "README.md").read_text()
    assert all(f"../docs/figures/{e['file']}" in guide for e in captions.values())
