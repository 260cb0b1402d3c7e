"""Rung 1's default comparison: its verdicts (claims 5 and 6) on synthetic rows in both directions, the regime
they carry, and the comparison figure."""
import numpy as np
import pytest

from toy_rl.bandit.comparison import ENDPOINTS, comparison_checks, comparison_verdicts, pooled_regime
from toy_rl.bandit.views import comparison_view
from toy_rl.experiments.controls import MEAN_BOUNDS

RULES = ("symmetric", "clip-higher", "bapo", "fixed[0.6,1.2]", "fixed[0.8,2.0]", MEAN_BOUNDS)


def rows_with(shift: dict, seeds=10, below=0.9, moved=0.7, cells=(("reuse", 2), ("lag", 4)), seed=0):
    """Rows as compare() writes them: every rule = a per-seed base (shared, what pairing removes) + its shift +
    small noise; BAPO's gate fields on every row of a cell."""
    rng = np.random.default_rng(seed)
    rows = []
    for mode, k in cells:
        base = rng.normal(0.7, 0.1, seeds)
        for rule in RULES:
            values = base + shift.get(rule, 0.0) + rng.normal(0, 0.002, seeds)
            row = dict(mode=mode, staleness=k, rule=rule, seed_ids=list(range(seeds)), regime="negatives-dominate"
                       if below > 0.5 else "balanced", bapo_moved_frac=moved, bapo_below_frac=below,
                       bapo_updates=3000, per_seed={e: values.tolist() for e in ENDPOINTS})
            rows.append(row)
    return rows


def statuses(rows):
    return {v.claim: v.status for v in comparison_checks(rows)}


def test_bapo_ahead_of_every_rule_supports_both_claims():
    rows = rows_with({"bapo": 0.05, "clip-higher": 0.02})
    assert statuses(rows) == {5: "supported", 6: "supported"}


def test_a_fixed_rule_ahead_of_bapo_contradicts_claim_6_and_is_counted_against():
    rows = rows_with({"bapo": 0.05, "clip-higher": 0.02, "fixed[0.8,2.0]": 0.08})
    checks = {v.claim: v for v in comparison_checks(rows)}
    assert checks[5].status == "supported"
    assert checks[6].status == "contradicted" and checks[6].n_against == 2     # two cells, the primary endpoint


def test_only_the_primary_endpoint_is_tested_and_the_table_prints_the_verdicts_p_holm():
    """Issue 24: saturated endpoints joined the family, and one comparison printed two p_holm values."""
    from toy_rl.bandit.comparison import PRIMARY, with_verdicts_p
    rows = rows_with({"bapo": 0.05, "clip-higher": 0.02})
    for r in rows:
        r.update(diff_mean_reward=0.0, diff_final_reward=0.0, diff_p_best=0.0) if r["rule"] != "bapo" else None
    checks = comparison_checks(rows)
    assert {t.what.split(",")[0] for v in checks for t in v.tests} == {PRIMARY.replace("_", " ")}
    family = {t.key: t.p_holm for v in checks for t in v.tests}
    for r in with_verdicts_p(rows):
        if r["rule"] == "bapo":
            continue
        key = (f"{'epoch reuse' if r['mode'] == 'reuse' else r['mode']} {r['staleness']}", PRIMARY, "bapo", r["rule"])
        if key in family:
            assert r["p_holm_mean_reward"] == family[key]
        else:
            assert np.isnan(r["p_holm_mean_reward"])                    # a control no claim tests: not in the family
        assert np.isnan(r["p_holm_final_reward"]) and np.isnan(r["p_holm_p_best"])


def test_a_significant_difference_under_one_point_counts_neither_way():
    """Issue 24: differences of 0.0002-0.011 in expected reward counted "for" claim 5."""
    rows = rows_with({"bapo": 0.004, "clip-higher": 0.002})
    checks = {v.claim: v for v in comparison_checks(rows)}
    tests = [t for t in checks[5].tests if t.b != "clip-higher" or t.a != "clip-higher"]
    assert any(t.p_holm < 0.05 for t in tests)                          # significant with 10 seeds and tiny noise
    assert checks[5].n_for == 0 and checks[5].status == "inconclusive"
    assert "below the smallest effect worth reporting" in checks[5].direction


def test_claim_6_is_not_testable_where_bapo_sits_at_its_caps():
    """Issue 24: under lag BAPO sat at its caps (c_high SD 0.04-0.06), so "BAPO vs its mean bounds held fixed" was a
    tie by construction; claim 6 is tested only where c_high varies (SD > 0.1)."""
    rows = rows_with({"bapo": 0.05, "fixed[0.8,2.0]": 0.08})
    for r in rows:
        if r["rule"] == "bapo":
            r["c_high_sd"] = 0.3 if r["mode"] == "reuse" else 0.05
    checks = {v.claim: v for v in comparison_checks(rows)}
    assert {t.what.split(", ")[1] for t in checks[6].tests} == {"epoch reuse 2"}
    assert "not testable where BAPO's bounds barely vary" in checks[6].detail and "lag 4 0.05" in checks[6].detail
    for r in rows:
        if r["rule"] == "bapo":
            r["c_high_sd"] = 0.05
    assert statuses(rows)[6].startswith("not testable")


def test_clip_higher_below_symmetric_contradicts_claim_5():
    rows = rows_with({"bapo": 0.05, "clip-higher": -0.03})
    assert statuses(rows)[5] == "contradicted"


def test_no_difference_is_inconclusive_not_partly():
    assert set(statuses(rows_with({})).values()) == {"inconclusive"}


def test_pairs_are_matched_by_seed_id():
    rows = rows_with({"bapo": 0.05, "clip-higher": 0.02})
    for r in rows:                                   # reverse one rule's seed order: the pairing must follow ids
        if r["rule"] == "symmetric":
            r["seed_ids"] = r["seed_ids"][::-1]
            r["per_seed"] = {e: v[::-1] for e, v in r["per_seed"].items()}
    assert statuses(rows)[5] == "supported"


@pytest.mark.parametrize("below, name", [(0.9, "negatives-dominate"), (0.1, "balanced")])
def test_the_regime_is_pooled_over_cells_and_named_in_every_verdict(below, name):
    rows = rows_with({"bapo": 0.05}, below=below, moved=0.01)
    assert pooled_regime(rows).name == name
    lines = comparison_verdicts(rows)
    assert all(f"regime {name}" in line for line in lines)
    assert all(("ran as fixed [0.6, 1.2]" in line) == (name == "balanced") for line in lines)


def test_comparison_view_draws_one_panel_per_cell():
    rows = rows_with({"bapo": 0.05})
    for r in rows:                                   # the drawn intervals: what compare() adds beside BAPO's rows
        if r["rule"] != "bapo":
            r.update(diff_mean_reward=0.05, diff_mean_reward_lo=0.04, diff_mean_reward_hi=0.06, p_holm_mean_reward=0.01)
    fig, drawn = comparison_view(rows)
    assert list(drawn) == ["epoch reuse 2", "lag 4"] and len(fig.axes) == 2
    assert set(drawn["lag 4"]) == set(RULES) - {"bapo"}
    with pytest.raises(ValueError, match="endpoint"):
        comparison_view(rows, endpoint="accuracy")


def test_command_prints_the_table_and_the_verdicts(capsys):
    from toy_rl.cli import main
    assert main(["bandit", "--compare", "--smoke", "--seeds", "2", "--steps", "20", "--json", "--no-progress"]) == 0
    import json
    out = json.loads(capsys.readouterr().out)
    assert out["preset"] == "long-failures" and len(out["rows"]) == 4 * 9
    assert [line.split(" (")[0] for line in out["verdicts"]] == ["claim 5", "claim 6"]
    assert all("regime" in line for line in out["verdicts"])


def test_command_applies_the_setting_flags_and_refuses_the_others(capsys):
    """Issue 24: --compare dropped --lr, --task-seed, --tokens, --group-size, --mode, --staleness and --steps (--lr 0.1
    and --lr 100 gave the same table). Given flags change the setting (and are returned with it); the cells follow
    --mode and --staleness; flags that cannot apply are refused by name."""
    import json
    from toy_rl.cli import main

    def compare(*flags):
        assert main(["bandit", "--compare", "--seeds", "2", "--steps", "12", "--mode", "lag", "--staleness", "2",
                     "--json", "--no-progress", *flags]) == 0
        return json.loads(capsys.readouterr().out)

    slow, fast = compare("--lr", "0.1"), compare("--lr", "100", "--task-seed", "3", "--tokens", "6", "--group-size", "4")
    assert slow["config"]["lr"] == 0.1 and slow["config"]["steps"] == 12 and slow["cells"] == [["lag", 2]]
    assert {k: fast["config"][k] for k in ("lr", "task_seed", "n_tokens", "group_size")} == \
        {"lr": 100.0, "task_seed": 3, "n_tokens": 6, "group_size": 4}
    assert len(slow["rows"]) == 9 and {r["mode"] for r in slow["rows"]} == {"lag"}
    assert [r["final_reward"] for r in slow["rows"]] != [r["final_reward"] for r in fast["rows"]]
    for flags, named in ((["--preset", "trap"], "--preset"), (["--rule", "bapo"], "--rule"),
                         (["--staleness", "0"], "--staleness"), (["--mode", "sideways"], "--mode")):
        assert main(["bandit", "--compare", "--seeds", "2", "--steps", "12", *flags]) == 2
        assert named in capsys.readouterr().err
