"""Sweeps, 95% bands and Welch tests over seeds, rung 1 through the one runner (toy_rl.experiments), and the CLI
commands `bandit` and `entropy-rule`."""
import json
import subprocess
import sys

import numpy as np
import pytest
from scipy import stats

from toy_rl.bandit import BanditConfig
from toy_rl.bandit.experiments import (bounds_ablation, confidence_band, format_table, summary_table, sweep,
                                       welch_test)
from toy_rl.bandit import experiments as bandit_experiments
from toy_rl.bandit.experiments import as_results
from toy_rl.cli import main
from toy_rl.experiments import grid, load, make_spec, summarize, sweep as run_sweep

TINY = BanditConfig(n_tokens=8, n_contexts=2, group_size=4, steps=25)


def test_confidence_band_is_the_t_interval():
    x = np.array([[1.0, 2.0], [2.0, 2.0], [4.0, np.nan], [5.0, 2.0]])
    mean, lo, hi = confidence_band(x)
    ci = stats.t.interval(0.95, 3, loc=3.0, scale=np.std([1, 2, 4, 5], ddof=1) / 2)
    assert mean[0] == 3.0 and lo[0] == pytest.approx(ci[0]) and hi[0] == pytest.approx(ci[1])
    assert mean[1] == lo[1] == hi[1] == 2.0                                   # NaN ignored, no spread


def test_welch_test():
    assert welch_test([1, 2, 3], [1, 2, 3]) == (0.0, 1.0)
    t, p = welch_test([0.0, 0.1, 0.2, 0.1], [1.0, 1.1, 0.9, 1.0])
    assert t < 0 and p < 1e-3


def test_sweep_and_summary_table():
    results = sweep(TINY, stalenesses=(0, 2), rules=("symmetric", "bapo"), seeds=range(3))
    assert set(results) == {(0, "symmetric"), (0, "bapo"), (2, "symmetric"), (2, "bapo")}
    assert results[2, "bapo"].curve("entropy").shape == (3, 25)
    assert results[2, "bapo"].curve("entropy", with_initial=True).shape == (3, 26)
    rows = summary_table(results)
    row = next(r for r in rows if r["staleness"] == 2 and r["rule"] == "bapo")
    for key in ("final_entropy", "final_entropy_lo", "final_entropy_hi", "final_reward", "mean_reward",
                "rho", "c_low", "c_high", "clip_frac_low", "clip_frac_high", "grad_norm", "p_final_reward"):
        assert key in row, key
    on_policy = next(r for r in rows if r["staleness"] == 0 and r["rule"] == "bapo")
    assert on_policy["p_final_entropy"] == 1.0 and on_policy["clip_frac_low"] == 0
    assert "bapo" in format_table(rows)
    with pytest.raises(ValueError, match="staleness"):
        sweep(TINY, stalenesses=(-1,), seeds=range(2))


SMALL = dict(steps=25, n_tokens=8, prompts=2, group_size=4, progress=False)


def test_rung1_through_the_runner_is_the_vectorised_sweep(tmp_path, monkeypatch):
    calls = []
    real = bandit_experiments.simulate
    monkeypatch.setattr(bandit_experiments, "simulate", lambda *a, **k: calls.append(a[2]) or real(*a, **k))
    specs = grid("bandit", rules=("symmetric", "bapo"), stalenesses=(0, 2), seeds=range(3), out=tmp_path, **SMALL)
    results = run_sweep(specs)
    assert calls == [[0, 1, 2]] * 4                          # one simulate per cell, its seeds side by side
    assert list(results) == [("on-policy", "symmetric"), ("on-policy", "bapo"), ("reuse-2", "symmetric"),
                             ("reuse-2", "bapo")]
    direct = sweep(TINY, stalenesses=(0, 2), rules=("symmetric", "bapo"), seeds=range(3))
    for (k, rule), bandit_run in direct.items():
        runs = results["on-policy" if k == 0 else f"reuse-{k}", rule]
        assert [recs[-1]["seed"] for recs in runs] == [0, 1, 2] and all(recs[-1]["final"] for recs in runs)
        np.testing.assert_allclose([recs[-1]["expected_reward"] for recs in runs], bandit_run.final("expected_reward"),
                                   rtol=1e-6)
        np.testing.assert_allclose([r["c_high"] for r in runs[1] if "c_high" in r], bandit_run.metrics["c_high"][1],
                                   rtol=1e-6)
    # one table for every rung: the same numbers as the bandit's own summary, with paired tests by seed
    rows = {(r["scenario"], r["rule"]): r for r in summarize(results)}
    old = {(r["staleness"], r["rule"]): r for r in summary_table(direct)}
    assert rows["reuse-2", "bapo"]["final_expected_reward"] == pytest.approx(old[2, "bapo"]["final_reward"], rel=1e-6)
    assert rows["on-policy", "bapo"]["diff_vs_symmetric"] == 0 and rows["on-policy", "bapo"]["p_vs_symmetric"] == 1
    assert summarize(as_results(direct))[3]["final_expected_reward"] == pytest.approx(
        rows["reuse-2", "bapo"]["final_expected_reward"], rel=1e-6)
    # finished seeds are read back; a new seed runs alone and matches the same seed run among others
    calls.clear()
    assert run_sweep(specs) == results and calls == []
    assert load(tmp_path / "bandit-rare-correct") == results
    more = run_sweep(grid("bandit", rules=("bapo",), stalenesses=(2,), seeds=range(4), out=tmp_path, **SMALL))
    assert calls == [[3]] and more["reuse-2", "bapo"][:3] == results["reuse-2", "bapo"]
    together = run_sweep(grid("bandit", rules=("bapo",), stalenesses=(2,), seeds=[2, 3], out=tmp_path / "b", **SMALL))
    assert together["reuse-2", "bapo"][1] == more["reuse-2", "bapo"][3]


def test_rung1_specs_refuse_what_the_bandit_does_not_have(tmp_path):
    with pytest.raises(ValueError, match="has no temperature"):
        make_spec("bandit", temperature=0.5, out=tmp_path, **SMALL)
    with pytest.raises(ValueError, match="unknown setting"):
        make_spec("bandit", warmstart=None)
    with pytest.raises(ValueError, match="unknown task"):
        make_spec("bandit", "add")
    with pytest.raises(ValueError, match="pg"):
        make_spec("bandit", pg="adam", out=tmp_path, **SMALL)
    assert not any(tmp_path.iterdir())


def test_bounds_ablation():
    out = bounds_ablation(TINY, bounds=((0.8, 1.2), (0.6, 2.0)), seeds=range(2))
    assert out[0.6, 2.0].metrics["c_high"].max() == pytest.approx(2.0)
    with pytest.raises(ValueError, match="bounds"):
        bounds_ablation(TINY, bounds=((1.2, 0.8),), seeds=range(2))


def test_cli_bandit_json(tmp_path, capsys):
    out = tmp_path / "curves.jsonl"
    assert main(["bandit", "--rule", "symmetric", "bapo", "--staleness", "0", "4", "--steps", "20", "--seeds", "3",
                 "--tokens", "8", "--out", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["rules"] == ["symmetric", "bapo"] and summary["seeds"] == 3
    assert {(r["staleness"], r["rule"]) for r in summary["rows"]} == {(0, "symmetric"), (0, "bapo"),
                                                                      (4, "symmetric"), (4, "bapo")}
    assert all("final_entropy" in r and "final_reward" in r for r in summary["rows"])
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert "config" in lines[0] and len(lines) == 1 + 4 * 20
    assert {"entropy", "entropy_lo", "entropy_hi", "update", "rule"} <= set(lines[1])
    assert json.loads(out.with_suffix(".summary.json").read_text())["rows"] == summary["rows"]


def test_cli_entropy_rule_json(capsys):
    assert main(["entropy-rule", "--instances", "800", "--seed", "3", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    for key in ("instances", "sign_agreement", "median_rel_error", "error_slope", "forms", "quadrants", "etas"):
        assert key in report
    assert report["instances"] == 800 and 1.8 <= report["error_slope"] <= 2.2


def test_cli_tables_print(tmp_path):
    run = lambda *a: subprocess.run([sys.executable, "-m", "toy_rl", *a], capture_output=True, text=True)
    out = run("bandit", "--rule", "all", "--staleness", "2", "--steps", "10", "--seeds", "2", "--tokens", "8",
              "--out", str(tmp_path / "c.jsonl"))
    assert out.returncode == 0, out.stderr
    assert "clip-higher" in out.stdout and "final_entropy" in out.stdout
    out = run("entropy-rule", "--instances", "300")
    assert out.returncode == 0 and "sign agrees" in out.stdout


@pytest.mark.parametrize("args, needle", [
    (["bandit", "--rule", "ppo"], "--rule"), (["bandit", "--tokens", "1"], "--tokens"),
    (["bandit", "--group", "1"], "--group"), (["bandit", "--staleness", "-2"], "--staleness"),
    (["bandit", "--lr", "0"], "--lr"), (["bandit", "--lr", "-0.1"], "--lr"), (["bandit", "--preset", "x"], "--preset"),
    (["bandit", "--mode", "sync"], "--mode"), (["bandit", "--seeds", "0"], "--seeds"),
    (["entropy-rule", "--instances", "0"], "--instances"), (["entropy-rule", "--tokens", "1"], "--tokens"),
])
def test_cli_bad_input_is_one_clear_line(args, needle, capsys, tmp_path):
    assert main(args + (["--out", str(tmp_path / "x.jsonl")] if args[0] == "bandit" else [])) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err
