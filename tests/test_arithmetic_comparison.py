"""Rung 2's default comparison: its table and tests on synthetic runs (both directions), the realised bounds,
bad input, and the command on the smoke preset."""
import json

import numpy as np
import pytest

from toy_rl.arithmetic.comparison import (as_cells, compare, comparison_verdicts, format_rows, gate_line,
                                          is_complete, preset_rules, realised_bounds, seeds_needed, table_rows,
                                          with_verdicts_p)
from toy_rl.clipping import BAPO, Symmetric
from toy_rl.experiments.controls import MEAN_BOUNDS, control_rules, mean_bounds_rule


def fake_run(seed, accuracies, c_low=0.6, c_high=1.2, rho_before=0.5, updates=4, swing=0.0):
    """Records as the loop logs them: an evaluation every 2 updates, then the final record. ``swing``: c_high moves
    by ± that much from update to update (an adaptive rule's bounds vary)."""
    recs = []
    for step in range(updates):
        r = dict(step=step, seed=seed, rule="x", staleness=8, c_low=c_low, c_high=c_high + swing * (-1) ** step,
                 rho_before=rho_before,
                 clip_frac_low=0.01, clip_frac_high=0.02, approx_kl=0.01, reward_mean=0.2)
        if step % 2 == 0:
            r["accuracy"] = accuracies[step // 2]
        recs.append(r)
    recs.append(dict(step=updates, seed=seed, final=True, accuracy=accuracies[-1]))
    return recs


def runs_with_gap(gap, seeds=8, noise=0.02, seed=0):
    """BAPO = symmetric + gap on every seed, with seed-level noise shared by both (what pairing removes)."""
    rng = np.random.default_rng(seed)
    base = rng.normal(0.3, 0.05, seeds)
    jitter = rng.normal(0, noise, seeds)
    jitter -= jitter.mean()                       # the mean difference is exactly the gap
    sym = [fake_run(s, [0.2, b, b]) for s, b in enumerate(base)]
    bapo = [fake_run(s, [0.2, b + gap + j, b + gap + j], c_low=0.85, c_high=2.7, rho_before=0.3, swing=0.2)
            for s, (b, j) in enumerate(zip(base, jitter))]
    return {"bapo": bapo, "symmetric": sym}, {"bapo": BAPO(), "symmetric": Symmetric()}


@pytest.mark.parametrize("gap", [0.05, -0.05])
def test_table_names_the_direction_of_a_real_gap(gap):
    runs, rules = runs_with_gap(gap)
    rows = {r["rule"]: r for r in with_verdicts_p({"runs": runs, "rows": table_rows(runs, rules)})["rows"]}
    sym = rows["symmetric"]
    assert np.sign(sym["diff_final_accuracy"]) == np.sign(gap)
    assert sym["diff_final_accuracy"] == pytest.approx(gap, abs=0.03)
    assert sym["p_final_accuracy"] < 0.01 and sym["p_holm_auc_accuracy"] < 0.01
    assert np.isnan(sym["p_holm_final_accuracy"])        # the secondary endpoint is reported, not in the family
    assert "diff_final_accuracy" not in rows["bapo"]                      # the reference is not tested against itself
    assert rows["bapo"]["c_high"] == pytest.approx(2.7)


def test_no_gap_is_not_significant_and_holm_only_raises_p():
    runs, rules = runs_with_gap(0.0, noise=0.03)
    rows = with_verdicts_p({"runs": runs, "rows": table_rows(runs, rules)})["rows"]
    row = [r for r in rows if r["rule"] == "symmetric"][0]
    assert row["p_holm_auc_accuracy"] >= row["p_auc_accuracy"] and row["p_holm_auc_accuracy"] > 0.05


def test_pairs_are_matched_by_seed_id_not_position():
    runs, rules = runs_with_gap(0.05)
    shuffled = {"bapo": runs["bapo"][::-1], "symmetric": runs["symmetric"]}
    a = [r for r in table_rows(runs, rules) if r["rule"] == "symmetric"][0]
    b = [r for r in table_rows(shuffled, rules) if r["rule"] == "symmetric"][0]
    assert a["p_final_accuracy"] == pytest.approx(b["p_final_accuracy"])


def test_seeds_needed_grows_with_scatter():
    quiet = table_rows(*runs_with_gap(0.0, noise=0.01))
    loud = table_rows(*runs_with_gap(0.0, noise=0.05))
    assert seeds_needed(quiet) < seeds_needed(loud)


def test_realised_bounds_skip_updates_without_advantage_mass():
    runs = [fake_run(0, [0.1, 0.2, 0.3], c_low=0.9, c_high=3.0, rho_before=0.2)]
    runs[0][1].update(rho_before=None, c_low=0.6, c_high=1.2)       # no advantage mass: start bounds, ignored
    assert realised_bounds(runs) == (0.9, 3.0)
    for r in runs[0]:
        r["rho_before"] = None
    with pytest.raises(ValueError, match="never mattered"):
        realised_bounds(runs)


def test_controls_and_mean_bounds_rule():
    rules = control_rules()
    assert {"symmetric", "clip-higher", "bapo", "fixed[0.6,1.2]", "bapo a-=0.8", "fixed[0.8,2.0]", "bapo-authors",
            "bapo rho0=0.5"} == set(rules) and MEAN_BOUNDS not in rules
    r = mean_bounds_rule(1.05, 0.95)                                    # widened to contain 1
    assert (r.lo, r.hi) == (1.0, 1.0)


def test_format_rows_and_gate_line():
    runs, rules = runs_with_gap(0.05)
    text = format_rows(with_verdicts_p({"runs": runs, "rows": table_rows(runs, rules)})["rows"])
    assert "symmetric" in text and "p_holm" in text and "< 0.001" in text and len(text.splitlines()[0].split("  ")) > 1
    assert "not measured" in gate_line({})
    balanced = dict(regime="balanced", rho_below_target_frac=0.1, search_moved_frac=0.0, c_low_mean=0.6,
                    c_high_mean=1.2, **{"lambda": {"q50": float("nan")}})
    assert "fixed rule [0.6, 1.2]" in gate_line({"gate": balanced}) and "n/a" in gate_line({"gate": balanced})


@pytest.mark.parametrize("kw, match", [(dict(seeds=[0]), "at least 2"), (dict(seeds=[1, 1]), "distinct"),
                                       (dict(seeds=[0, 1], workers=0), "workers")])
def test_bad_input_fails_before_any_work(kw, match, tmp_path):
    with pytest.raises(ValueError, match=match):
        compare("long-failures", out=tmp_path, **kw)
    assert not any(tmp_path.iterdir())


def test_command_smoke_runs_every_control(tmp_path, monkeypatch, capsys):
    from toy_rl.cli import main
    monkeypatch.setenv("TOY_RL_CACHE", str(tmp_path / "cache"))
    assert main(["arithmetic", "--compare", "--smoke", "--seeds", "2", "--out", str(tmp_path), "--json",
                 "--no-progress"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["preset"] == "long-failures-smoke" and out["seeds"] == [0, 1]
    assert {r["rule"] for r in out["rows"]} == set(control_rules()) | {MEAN_BOUNDS}
    assert "regime" in out["gate"]
    assert [v.split(" (")[0] for v in out["verdicts"]] == ["claim 5", "claim 6"]
    assert (tmp_path / "compare" / "long-failures-smoke" / "lag-8" / "bapo" / "seed1" / "metrics.jsonl").exists()


def with_controls(gap_fixed):
    """BAPO 5 points above symmetric, clip-higher and fixed [0.6, 1.2]; ``gap_fixed`` above the fixed rule at its
    mean bounds and fixed [0.8, 2.0] (each rule: BAPO's accuracies minus the gap, plus seed noise of mean 0)."""
    bapo = runs_with_gap(0.05)[0]["bapo"]
    noise = np.array([0.01, -0.01, 0.02, -0.02, 0.005, -0.005, 0.015, -0.015])

    def minus(gap):
        return [[dict(r, accuracy=r["accuracy"] - gap + noise[i]) if r.get("accuracy") is not None else r
                 for r in recs] for i, recs in enumerate(bapo)]
    return {"runs": {"bapo": bapo, "symmetric": minus(0.05), "clip-higher": minus(0.05), "fixed[0.6,1.2]": minus(0.05),
                     "fixed@bapo-mean": minus(gap_fixed), "fixed[0.8,2.0]": minus(gap_fixed)}}


def test_verdicts_support_claim_5_and_say_when_fixed_bounds_tie():
    from toy_rl.arithmetic.comparison import comparison_checks
    checks = {v.claim: v for v in comparison_checks(with_controls(0.0))}
    assert checks[5].status == "supported" and checks[5].n_against == 0
    assert checks[6].status == "partly supported"            # beats [0.6, 1.2], ties its own mean bounds
    assert "negatives-dominate" in checks[5].regime


def test_claim_6_is_not_testable_when_bapo_never_leaves_its_caps():
    from toy_rl.arithmetic.comparison import comparison_checks
    result = with_controls(-0.05)
    for recs in result["runs"]["bapo"]:
        for r in recs:
            if r.get("c_high") is not None:
                r["c_high"] = 3.0                       # at its cap on every update: a fixed rule in all but name
    checks = {v.claim: v for v in comparison_checks(result)}
    assert checks[6].status.startswith("not testable") and checks[6].n_against == 0


def test_verdicts_contradict_when_the_fixed_rule_wins():
    from toy_rl.arithmetic.comparison import comparison_checks, comparison_verdicts
    checks = {v.claim: v for v in comparison_checks(with_controls(-0.05))}
    assert checks[6].status == "contradicted" and checks[6].n_against >= 2
    assert any("CONTRADICTED" in line for line in comparison_verdicts(with_controls(-0.05)))


def test_preset_rules_are_the_controls_or_the_few_a_preset_names():
    import dataclasses

    from toy_rl.arithmetic.presets import get_preset
    assert list(preset_rules(get_preset("long-failures"))) == list(control_rules())
    assert list(preset_rules(get_preset("long-failures-partial"))) == ["symmetric", "clip-higher", "bapo"]
    assert preset_rules(get_preset("long-failures-partial"))["bapo"] == BAPO()
    bad = dataclasses.replace(get_preset("long-failures"), rules=("bapo", "nope"))
    with pytest.raises(ValueError, match="unknown rules"):
        preset_rules(bad)


def test_as_cells_keys_the_runs_by_scenario_and_rule():
    runs, _ = runs_with_gap(0.05, seeds=3)
    cells = as_cells({"scenario": "partial-8", "runs": runs})
    assert set(cells) == {("partial-8", "bapo"), ("partial-8", "symmetric")}
    assert cells["partial-8", "bapo"] is runs["bapo"]


def test_partial_preset_smoke_compares_three_rules_and_reads_back(tmp_path, monkeypatch):
    from toy_rl.arithmetic.presets import smoke_preset
    monkeypatch.setenv("TOY_RL_CACHE", str(tmp_path / "cache"))
    preset = smoke_preset("long-failures-partial")
    result = compare(preset, seeds=range(2), out=tmp_path)
    assert result["scenario"] == "partial-8" and set(result["runs"]) == {"symmetric", "clip-higher", "bapo",
                                                                         MEAN_BOUNDS}
    assert (tmp_path / "long-failures-partial-smoke" / "partial-8" / "clip-higher" / "seed1" / "config.json").exists()
    assert is_complete(preset, range(2), tmp_path)
    updates = [r for r in result["runs"]["bapo"][0] if r.get("c_low") is not None]
    assert updates and all("staleness_mean" in r and "mixed_versions" in r for r in updates)
    assert [v.split(" (")[0] for v in comparison_verdicts(result)] == ["claim 5", "claim 6"]
    logs = sorted((tmp_path / "long-failures-partial-smoke").rglob("metrics.jsonl"))
    stamps = [p.stat().st_mtime_ns for p in logs]
    again = compare(preset, seeds=range(2), out=tmp_path)          # read back, not retrained
    assert [p.stat().st_mtime_ns for p in logs] == stamps
    key = lambda res: [r[k] for r in res["rows"] for k in ("auc_accuracy", "final_accuracy")]
    assert key(again) == pytest.approx(key(result), nan_ok=True)


def test_comparison_view_draws_bapo_bounds_over_the_updates_every_seed_made():
    from toy_rl.arithmetic.views import comparison_view
    runs, rules = runs_with_gap(0.05, seeds=3)
    runs["bapo"][0] = fake_run(0, [0.2, 0.3, 0.3, 0.3], c_low=0.85, c_high=2.7, rho_before=0.3, updates=6)
    result = {"runs": runs, "rows": with_verdicts_p({"runs": runs, "rows": table_rows(runs, rules)})["rows"],
              "preset": "p", "seeds": [0, 1, 2], "steps": 6, "scenario": "partial-8"}
    fig, drawn = comparison_view(result)
    ax_acc, ax_bounds, _ = fig.axes[:3]
    assert ax_acc.get_xlabel() == "step" and "6 steps" in fig.get_suptitle()
    assert set(drawn) == {"bapo", "symmetric"}
    assert max(len(line.get_xdata()) for line in ax_bounds.get_lines() if "BAPO" in str(line.get_label())) == 4


def test_comparison_view_keeps_the_accuracy_band_inside_0_and_1():
    """Two seeds far apart give a Student-t band wider than accuracy can go: it is cut to [0, 1]."""
    from toy_rl.arithmetic.views import comparison_view
    runs = {"bapo": [fake_run(0, [0.05, 0.05, 0.02]), fake_run(1, [0.9, 0.95, 0.98])],
            "symmetric": [fake_run(0, [0.1, 0.2, 0.3]), fake_run(1, [0.2, 0.3, 0.4])]}
    rules = {"bapo": BAPO(), "symmetric": Symmetric()}
    result = {"runs": runs, "rows": with_verdicts_p({"runs": runs, "rows": table_rows(runs, rules)})["rows"],
              "preset": "p", "seeds": [0, 1], "steps": 4}
    fig, _ = comparison_view(result)
    ys = np.concatenate([path.vertices[:, 1] for c in fig.axes[0].collections for path in c.get_paths()])
    assert ys.min() >= 0 and ys.max() <= 1


def test_command_passes_steps_only_when_given(monkeypatch, capsys):
    """``--compare`` runs the preset's number of updates unless ``--steps`` is given."""
    import toy_rl.arithmetic.comparison as comparison
    from toy_rl.cli import main
    seen = []

    def fake_compare(preset, seeds, steps=None, **kw):
        seen.append(steps)
        raise SystemExit(0)                      # stop before any run
    monkeypatch.setattr(comparison, "compare", fake_compare)
    for argv, steps in ((["arithmetic", "--compare", "--seeds", "2"], None),
                        (["arithmetic", "--compare", "--seeds", "2", "--steps", "5"], 5)):
        with pytest.raises(SystemExit):
            main(argv)
        assert seen.pop() == steps


def test_command_runs_another_step_size_as_its_own_preset_and_refuses_what_the_preset_fixes(tmp_path, monkeypatch,
                                                                                           capsys):
    """Issue 24: --compare silently dropped flags. --lr runs the comparison as <preset>-lr<value> in its own folder,
    --rule runs the named rules; flags the preset fixes are refused by name."""
    from toy_rl.cli import main
    monkeypatch.setenv("TOY_RL_CACHE", str(tmp_path / "cache"))
    assert main(["arithmetic", "--compare", "--smoke", "--seeds", "2", "--lr", "0.002", "--rule", "symmetric", "bapo",
                 "--out", str(tmp_path), "--json", "--no-progress"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["preset"] == "long-failures-smoke-lr0.002"
    assert {r["rule"] for r in out["rows"]} == {"symmetric", "bapo", MEAN_BOUNDS}
    config = json.loads(next((tmp_path / "compare" / "long-failures-smoke-lr0.002").rglob("config.json")).read_text())
    assert config["lr"] == 0.002
    for flags in (["--task", "add"], ["--staleness", "2"], ["--mode", "lag"], ["--prompts", "4"]):
        assert main(["arithmetic", "--compare", "--smoke", "--out", str(tmp_path), *flags]) == 2
        assert f"{flags[0]} does not apply to --compare" in capsys.readouterr().err
