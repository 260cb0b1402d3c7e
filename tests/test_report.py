"""`toy-rl report`: each rung's report in smoke mode (into tmp_path), as one self-contained HTML file and as
Markdown with its PNGs beside it; bad input fails with one clear line before any work."""
import re

import pytest

from toy_rl.cli import main
from toy_rl.report import ReportError, build_report, write_report
from toy_rl.report.document import check_out, to_markdown


@pytest.fixture(scope="module")
def rung1():
    return build_report(1, smoke=True, progress=False)


def test_rung1_html_is_one_self_contained_page(rung1, tmp_path):
    [path] = write_report(rung1, tmp_path / "r1.html", "html")
    page = path.read_text()
    assert page.startswith("<!doctype html>") and page.rstrip().endswith("</html>")
    images = re.findall(r"<img [^>]*src='([^']*)'", page)
    assert len(images) == len(rung1.figures) == 1
    assert all(src.startswith("data:image/png;base64,iVBORw0KGgo") for src in images)   # PNGs, embedded
    assert not re.search(r"(src|href)=['\"](?!data:)", page)                              # nothing to fetch
    assert page.count("<tr>") == 1 + 4 * 9                    # header + 4 cells x (8 rules + fixed at BAPO's mean)
    for text in ("final reward", "mean reward", "BAPO − rule", "toy-rl report --rung 1 --smoke", "SMOKE",
                 "Machine", "Holm", "claim 5 (", "claim 6 (", "long-failures"):
        assert text in page
    assert list(tmp_path.iterdir()) == [path]                  # no PNG beside it


def test_rung1_table_pairs_every_rule_with_bapo_in_every_cell(rung1):
    t = rung1.table
    rows = {(r[0], r[1]): dict(zip(t.headers, r)) for r in t.rows}
    cells = ("epoch reuse 2", "epoch reuse 4", "lag 2", "lag 4")
    assert {c for c, _ in rows} == set(cells) and len(rows) == 36
    assert re.fullmatch(r"\d\.\d{3} \[\d\.\d{3}, \d\.\d{3}\]", rows["lag 4", "bapo"]["mean reward"])
    assert rows["lag 4", "bapo"]["p_holm"] == "" and rows["lag 4", "symmetric"]["p_holm"] != ""


def test_rung1_has_the_regime_and_the_verdicts_notebook_02_prints(rung1):
    from toy_rl.bandit.comparison import comparison_verdicts
    from toy_rl.report.runs import bandit_comparison
    regime, *claims = rung1.verdicts
    assert regime.startswith("regime ") and [c.split(" (")[0] for c in claims] == ["claim 5", "claim 6"]
    rows, _, _ = bandit_comparison(smoke=True, progress=False)
    assert claims == comparison_verdicts(rows)                  # the same function on the same runs
    assert "toy_rl.bandit.comparison.comparison_verdicts" in rung1.notes[0]
    md = to_markdown(rung1, ["a.png"])
    assert "## The paper's claims at this scale" in md and "- claim 5 (under staleness BAPO > clip-higher" in md


def test_rung2_markdown_writes_pngs_beside_it(tmp_path):
    report = build_report(2, smoke=True, runs=tmp_path / "runs", progress=False)
    files = write_report(report, tmp_path / "out" / "rung2.md", "md")
    md = files[0].read_text()
    for png in files[1:]:
        assert png.parent == files[0].parent and png.read_bytes()[:4] == b"\x89PNG"
        assert f"]({png.name})" in md
    regime, *claims = report.verdicts
    assert regime.startswith("regime: ") and [c.split(" (")[0] for c in claims] == ["claim 5", "claim 6"]
    assert "## Summary" in md and "| bapo |" in md and "| fixed@bapo-mean |" in md and "claim 6" in md
    assert "SMOKE" in dict(report.facts)["Configuration"]


def test_rung3_with_a_tiny_model(tmp_path):
    lm = pytest.importorskip("test_lm_run", reason="rung 3 needs the llm extra (transformers, peft)")
    report = build_report(3, smoke=True, runs=tmp_path, progress=False, model=lm.tiny_llama)
    ks = {row[0] for row in report.table.rows}
    assert ks == {"0", "1"} and len(report.table.rows) == 4      # 3 rules at staleness 1 + on-policy clip-higher
    assert len(report.verdicts) == 5 and len(report.figures) == 2
    assert "s.e." in report.table.rows[0][4]                     # one seed: ± binomial standard error
    assert "claim 1" in to_markdown(report, ["a.png", "b.png"])


def test_cli_report(tmp_path, capsys):
    assert main(["report", "--rung", "1", "--smoke", "--out", str(tmp_path / "r.md"), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "Written:" in out and (tmp_path / "r.md").is_file() and (tmp_path / "r-comparison.png").is_file()


def test_bad_input_fails_clearly(tmp_path, capsys):
    assert main(["report", "--rung", "5"]) == 2
    assert "invalid choice: 5" in capsys.readouterr().err
    with pytest.raises(ReportError, match="--rung must be one of 1, 2, 3"):
        build_report(7)
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    assert main(["report", "--rung", "1", "--smoke", "--out", str(blocker / "r.html")]) == 2
    assert "--out: cannot create the folder" in capsys.readouterr().err
    assert main(["report", "--rung", "1", "--smoke", "--seeds", "0", "--out", str(tmp_path)]) == 2
    assert "--seeds must be >= 1; got 0" in capsys.readouterr().err
    with pytest.raises(ValueError, match="--format"):
        check_out(tmp_path / "x.pdf", "pdf")


def test_rung3_reports_its_comparison_where_negatives_dominate_from_results():
    """Rung 3's report leads with the search-hard-warm comparison read back from results/ (nothing trained), judged
    in its one grid cell, and keeps the add sweep after it as the balanced control, named as such."""
    from toy_rl.report.rungs import _rung3_comparison, _with_balanced_control
    hard = _rung3_comparison()
    regime, *claims = hard["verdicts"]
    assert regime.startswith("regime: negatives-dominate") and [c.split(" (")[0] for c in claims] == ["claim 5", "claim 6"]
    rules = [row[0] for row in hard["table"].rows]
    assert rules[0] == "bapo" and "symmetric" in rules and hard["table"].rows[0][2] == "–"   # BAPO: the reference
    from toy_rl.course.logs import RESULTS, run_folders
    from toy_rl.report.rungs import HARD
    landed = len(run_folders(RESULTS / HARD))
    assert hard["seeds"].startswith(f"per rule: bapo {len(run_folders(RESULTS / HARD / 'reuse-2' / 'bapo'))}")
    landed_text = f"{landed} of the 20 runs landed so far" if landed < 20 else "all 20 runs landed"
    assert "search-hard-warm" in hard["config"] and landed_text in hard["source"]
    assert hard["notes"][0].startswith(f"Interim look: {landed} of the 20 runs") == (landed < 20)
    add = dict(config="task add", seeds=1, runner="toy-rl lora --rule all", source="runs/", figures=[("rules", None, "Rules.")],
               verdicts=["claim 1 (x): NOT TESTABLE"], notes=["Verdicts: add."])
    both = _with_balanced_control(hard, add)
    assert [name for name, _, _ in both["figures"]] == ["comparison", "rules"]
    assert both["verdicts"][-1] == "add, the balanced control: claim 1 (x): NOT TESTABLE"
    assert both["table"] is hard["table"] and both["seeds"].endswith("add: 1 per rule and staleness")


def test_settings_come_from_the_committed_runs_when_runs_holds_none(monkeypatch):
    """A figure or report that reads its runs back from results/ names their settings from the config.json there,
    not "settings unknown" (the captions of figures 05 and 06 said so while runs/ was empty)."""
    from toy_rl.arithmetic import DEFAULTS
    from toy_rl.experiments.logged import RESULTS, RUNS
    from toy_rl.report.runs import arithmetic_note
    monkeypatch.setenv("TOY_RL_LOGGED_ONLY", "1")               # read results/, whatever this checkout's runs/ holds
    assert (RESULTS / "arithmetic-scratchpad" / "partial-8" / "bapo").is_dir()
    note = arithmetic_note(RUNS / "arithmetic-scratchpad", [("partial-8", "bapo")], 1, DEFAULTS, False)
    assert "settings unknown" not in note and " updates, " in note and "1 seed(s) per rule" in note
    assert "settings unknown" in arithmetic_note(RUNS / "no-such-experiment", [("partial-8", "bapo")], 1,
                                                 DEFAULTS, False)
