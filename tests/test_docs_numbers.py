"""Numbers the docs quote agree with the code and the committed logs: the rung-2 model's size, wherever it is quoted,
and the findings (docs/findings.md), recomputed from results/."""
import json
import re
from pathlib import Path

import numpy as np

from toy_rl.arithmetic.model import GPT, ModelConfig

ROOT = Path(__file__).resolve().parents[1]
FINDINGS = ROOT / "docs" / "findings.md"
NOTEBOOK_06 = ROOT / "notebooks" / "06_lora_real_lm.ipynb"
SIZE = re.compile(r"(\d[\d,.]*\s?[kK]?)[- ]param(?:eter)?s?\b(?! cell)")


def _texts():
    """(name, text) of every doc and notebook that describes rung 2 (notebooks: markdown and code comments)."""
    for path in [ROOT / "README.md", ROOT / "notebooks" / "README.md", ROOT / "bench" / "README.md",
                 *sorted((ROOT / "docs").glob("*.md")), ROOT / "docs" / "figures" / "README.md"]:
        yield path.name, path.read_text()
    for path in sorted((ROOT / "notebooks").glob("0[0-6]*.ipynb")):
        cells = json.loads(path.read_text())["cells"]
        yield path.name, "\n".join("".join(c["source"]) for c in cells)


def test_the_rung2_model_has_211520_parameters_wherever_it_is_quoted():
    assert GPT(ModelConfig()).num_params() == 211_520
    quoted = []
    for name, text in _texts():
        for line in text.splitlines():
            if "GPT" in line or "rung 2" in line.lower() or "rung-2" in line or "211" in line or "212" in line:
                quoted += [(name, m.group(1).strip()) for m in SIZE.finditer(line) if m.group(1)[:2] in ("21", "0.")]
    assert quoted, "the README quotes the model's size"
    wrong = [(name, q) for name, q in quoted if q != "211,520"]
    assert not wrong, wrong


def _grid_numbers():
    """{(factor, claim, cell, rule): [BAPO − rule in points, per task instance]} and {(factor, claim): statuses}
    recomputed from the grid logs committed in results/ (toy_rl.bandit.grid)."""
    from toy_rl.bandit.comparison import comparison_checks
    from toy_rl.bandit.grid import load_grid
    grid = load_grid(ROOT / "results" / "bandit-grid", "long-failures")
    diffs, statuses = {}, {}
    for (factor, task), rows in grid.items():
        for v in comparison_checks(rows):
            statuses.setdefault((factor, v.claim), set()).add(v.status)
            for t in v.tests:
                diffs.setdefault((factor, v.claim, t.key[0], t.key[3]), []).append(round(t.diff * 100, 1))
    return grid, diffs, statuses


def test_the_rung1_findings_follow_from_the_committed_grid():
    """docs/findings.md, rung 1: the mean-reward table, the verdict of every step size (the same on every task
    instance) and the differences the bullets quote, recomputed from results/bandit-grid."""
    from toy_rl.bandit.comparison import cell_name
    grid, diffs, statuses = _grid_numbers()
    text = FINDINGS.read_text()
    section = text[text.index("## Rung 1: the bandit"):text.index("## Rung 2")]
    table = section[section.index("| staleness | symmetric | clip-higher"):].split("\n\n")[0].splitlines()[2:]
    order = ["symmetric", "clip-higher", "fixed[0.6,1.2]", "bapo", "fixed[0.8,2.0]", "fixed@bapo-mean"]
    rows = {(cell_name(r), r["rule"]): r["mean_reward"] for r in grid[1.0, 0]}
    for line in table:
        cells = [c.strip(" *") for c in line.strip("|").split("|")]
        assert [float(c) for c in cells[1:]] == [round(rows[cells[0], rule], 3) for rule in order], line
    verdicts = section[section.index("| claim | η × 0.5 | η × 1 | η × 2"):].split("\n\n")[0].splitlines()[2:]
    for line, claim in zip(verdicts, (5, 6)):
        quoted = [c.strip(" *") for c in line.strip("|").split("|")][1:4]
        assert [statuses[f, claim] for f in (0.5, 1.0, 2.0)] == [{q} for q in quoted], line
    span = lambda *key: (min(diffs[key]), max(diffs[key]))
    quotes = {"6.2-6.5 points under epoch\n  reuse 2": span(1.0, 5, "epoch reuse 2", "clip-higher"),
              "18.5-18.8 under reuse 4": span(1.0, 5, "epoch reuse 4", "clip-higher"),
              "3.7-3.9 under lag 4": span(1.0, 5, "lag 4", "clip-higher"),
              "+7.5 to +8.2": span(0.5, 5, "epoch reuse 4", "clip-higher"),
              "−1.2 to\n  −1.4 points": span(0.5, 5, "lag 4", "clip-higher"),
              "+15.8 to +16.4": span(0.5, 6, "epoch reuse 4", "fixed[0.6,1.2]")}
    for quote, (lo, hi) in quotes.items():
        assert quote in section, quote
        numbers = sorted(abs(float(x)) for x in re.findall(r"[\d.]+", quote.replace("\n", " ")) if x != "2" and x != "4")
        assert numbers == sorted([abs(lo), abs(hi)]), (quote, lo, hi)
    assert "(+2.9 to +15.8)" in section
    assert min(min(diffs[2.0, 5, c, "clip-higher"]) for c in ("epoch reuse 2", "epoch reuse 4", "lag 2", "lag 4")) == 2.9
    assert max(max(diffs[2.0, 5, c, "clip-higher"]) for c in ("epoch reuse 2", "epoch reuse 4", "lag 2", "lag 4")) == 15.8


def test_the_rung2_table_follows_from_the_committed_runs():
    """docs/findings.md, rung 2: the table's accuracies, BAPO − rule and p_holm, recomputed from the logs of
    results/compare/long-failures with the verdicts' own family (toy_rl.arithmetic.comparison)."""
    from toy_rl.arithmetic.comparison import table_rows, with_verdicts_p
    from toy_rl.experiments.controls import MEAN_BOUNDS, control_rules
    from toy_rl.experiments.runner import load
    folders = {"symmetric": "symmetric", "clip-higher": "clip-higher", "bapo": "bapo", "fixed-0.6-1.2": "fixed[0.6,1.2]",
               "bapo-low0.8-0.9": "bapo a-=0.8", "fixed-0.8-2": "fixed[0.8,2.0]", "bapo-authors": "bapo-authors",
               "bapo-rho0.5": "bapo rho0=0.5", "fixed-0.879-2.9565": MEAN_BOUNDS}
    runs = {folders[rule]: recs for (_, rule), recs in load(ROOT / "results" / "compare" / "long-failures").items()}
    rules = {**control_rules(), MEAN_BOUNDS: None}
    rows = {r["rule"]: r for r in with_verdicts_p({"runs": runs, "rows": table_rows(runs, rules)})["rows"]}
    text = FINDINGS.read_text()
    table = text[text.index("| rule | averaged over training | final | BAPO − rule"):].split("\n\n")[0].splitlines()[2:]
    assert len(table) == 9
    for line, label in zip(table, folders.values()):
        cells = [c.strip(" *") for c in line.strip("|").split("|")]
        r = rows[label]
        assert [float(cells[1]), float(cells[2])] == [round(r["auc_accuracy"], 3), round(r["final_accuracy"], 3)]
        if label == "bapo":
            continue
        assert float(cells[3].replace("−", "-")) == round(100 * r["diff_auc_accuracy"], 1)
        p = r["p_holm_auc_accuracy"]
        assert cells[4] == ("n/a" if np.isnan(p) else f"{p:.2g}"), (label, cells[4], p)


def test_the_rung2_step_grid_follows_from_the_committed_runs():
    """docs/findings.md, rung 2 at three step sizes: each rule's accuracy, BAPO − clip-higher with its p_holm, the
    verdicts per step size and across the grid, and the differences the bullets quote, recomputed from
    results/compare (toy_rl.arithmetic.step_grid)."""
    from toy_rl.arithmetic.step_grid import GRID_RULES, load_step_grid, step_grid_verdicts
    grid = load_step_grid(ROOT / "results" / "compare")
    verdicts = step_grid_verdicts(grid)
    text = FINDINGS.read_text()
    table = text[text.index("| step size | symmetric | clip-higher | BAPO |"):].split("\n\n")[0].splitlines()[2:]
    assert len(table) == 3
    for line, factor in zip(table, sorted(grid)):
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows = {r["rule"]: r for r in grid[factor]["rows"]}
        assert cells[0] == f"lr {grid[factor]['lr']:g} (× {factor:g})"
        assert [float(c) for c in cells[1:5]] == [round(rows[r]["auc_accuracy"], 3) for r in GRID_RULES[:2] + ("bapo", GRID_RULES[3])]
        ch = rows["clip-higher"]
        assert cells[5] == f"{100 * ch['diff_auc_accuracy']:+.2f} ({ch['p_holm_auc_accuracy']:.2g})".replace("-", "−")
        assert cells[6:8] == [verdicts[5]["cells"][factor], verdicts[6]["cells"][factor]]
    flat = " ".join(text.split())
    assert f"claim 5 {verdicts[5]['across'].split(':')[0].upper()}" in flat.replace("**", "")
    assert "in 1 of 3 grid cells" in verdicts[5]["across"] and verdicts[6]["across"].startswith("contradicted in 1 of 3")
    twice = {r["rule"]: r for r in grid[2.0]["rows"]}
    for rule, quote in (("clip-higher", "+2.09"), ("symmetric", "+2.02")):
        assert f"{100 * twice[rule]['diff_auc_accuracy']:+.2f}" == quote and quote in flat
    mean = twice["fixed@bapo-mean"]
    assert f"{100 * mean['diff_auc_accuracy']:.2f} points ahead of its own mean bounds" in flat
    assert f"[{twice['bapo']['c_low']:.2f}, {twice['bapo']['c_high']:.2f}]; p_holm = {mean['p_holm_auc_accuracy']:.2g}" in flat
    kl = [r["approx_kl"] for r in grid[2.0]["rows"]]
    assert "KL 0.13–0.15 per update" in flat and 0.125 <= min(kl) and max(kl) <= 0.15
    moved = [100 * grid[f]["gate"]["search_moved_frac"] for f in sorted(grid)]
    assert f"moved in {moved[0]:.0f} %, {moved[1]:.1f} % and {moved[2]:.0f} %" in flat


def test_the_rung1_regime_numbers_follow_from_the_pilot(capsys):
    """docs/findings.md, rung 1, "The regime first": the pilot's numbers on the balanced control and on
    long-failures, recomputed by running it (3 s each; rung 1 keeps no logs for it)."""
    from toy_rl.cli import main
    flat = " ".join(FINDINGS.read_text().split())
    pilots = {}
    for preset in ("balanced", "long-failures"):
        assert main(["pilot", "--rung", "1", "--preset", preset, "--json"]) == 0
        pilots[preset] = json.loads(capsys.readouterr().out)
    b, lf = pilots["balanced"], pilots["long-failures"]
    pct = lambda x: int(100 * x + 0.5)                   # a share in whole percent, halves rounded up
    assert b["regime"] == "balanced" and lf["regime"] == "negatives-dominate"
    assert (f"median {b['rho_before']['q50']:.2f} and is below ρ0 = 0.4 in only {pct(b['rho_below_target_frac'])} %"
            f" of updates; the bounds move in {pct(b['search_moved_frac'])} % of updates") in flat
    assert f"(mean c_high {b['c_high_mean']:.2f})" in flat
    assert (f"below ρ0 in {pct(lf['rho_below_target_frac'])} % of updates, bounds moved in "
            f"{pct(lf['search_moved_frac'])} % (early {pct(lf['search_moved_frac_early'])} %, late "
            f"{pct(lf['search_moved_frac_late'])} %), mean c_high {lf['c_high_mean']:.2f}, c_low "
            f"{lf['c_low_mean']:.2f}") in flat


def test_the_entropy_rule_numbers_follow_from_the_command(capsys):
    """docs/findings.md, rung 1: the Entropy-Clip Rule check, recomputed by running it (about a second)."""
    from toy_rl.cli import main
    assert main(["entropy-rule", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    flat = " ".join(FINDINGS.read_text().split())
    assert f"sign agreement {out['sign_agreement']:.3f}, error slope {out['error_slope']:.3f}" in flat
    assert f"in sign only {100 * out['forms']['paper_form_on_vanilla_step']['sign_agreement']:.0f} % of the time" in flat


def test_the_rung2_regime_follows_from_the_committed_runs():
    """docs/findings.md, rung 2, "Regime": BAPO's own updates in results/compare/long-failures (λ, ρ before the
    search, how often the bounds moved, reached ρ0 or ran to the caps) and the symmetric rule's clipping and KL."""
    from toy_rl.arithmetic.comparison import from_logs
    result = from_logs(ROOT / "results" / "compare" / "long-failures")
    g, lam, rho, s = result["gate"], result["gate"]["lambda"], result["gate"]["rho_before"], result["search"]
    sym = next(r for r in result["rows"] if r["rule"] == "symmetric")
    flat = " ".join(FINDINGS.read_text().split())
    quoted = (f"λ median {lam['q50']:.2f} (q10–q90 {lam['q10']:.2f}–{lam['q90']:.2f}), ρ before the search median "
              f"{rho['q50']:.2f} and below ρ0 in {100 * g['rho_below_target_frac']:.1f} % of updates, bounds moved in "
              f"{100 * g['search_moved_frac']:.1f} % (first half {100 * g['search_moved_frac_early']:.0f} %, second "
              f"{100 * g['search_moved_frac_late']:.0f} %). But BAPO reached ρ0 in only {100 * s['rho_reached_frac']:.0f} %")
    assert quoted in flat
    assert f"in {100 * s['bounds_at_end_frac']:.0f} % (mean bounds [{g['c_low_mean']:.2f}, {g['c_high_mean']:.2f}])" in flat
    assert (f"clipped {100 * sym['clip_frac_low']:.1f} % of tokens below and {100 * sym['clip_frac_high']:.1f} % above; "
            f"KL per update {sym['approx_kl']:.3f}") in flat


def test_the_rung3_pilot_regime_follows_from_the_committed_runs():
    """docs/findings.md, rung 3, "the pilot says yes": BAPO's updates in results/pilot/ (issue 26)."""
    from toy_rl.experiments import load
    from toy_rl.experiments.pilot import summarise_records
    runs = load(ROOT / "results" / "pilot" / "smollm2-135m-search-hard-warm")
    bapo, sym = runs["reuse-2", "bapo"], runs["reuse-2", "symmetric"]
    g = summarise_records(bapo, sym)
    seconds = [r["seconds"] for r in bapo[0] if not r.get("final")]
    flat = " ".join(FINDINGS.read_text().split())
    assert g["regime"] == "negatives-dominate" and "**negatives-dominate**" in flat
    assert (f"λ median {g['lambda']['q50']:.2f} (q10–q90 {g['lambda']['q10']:.2f}–{g['lambda']['q90']:.2f}), ρ before "
            f"the search median {g['rho_before']['q50']:.2f} and below ρ0 in {100 * g['rho_below_target_frac']:.1f} % of "
            f"updates, bounds moved in {100 * g['search_moved_frac']:.1f} % (mean bounds [{g['c_low_mean']:.2f}, "
            f"{g['c_high_mean']:.2f}])") in flat
    assert f"an update took {sum(seconds) / len(seconds):.1f} s on average" in flat


def test_the_rung2_partial_rollout_numbers_follow_from_the_committed_runs():
    """docs/findings.md, rung 2, "Under partial rollout": regime, drift, accuracies and the smallest p_holm, from
    results/compare/long-failures-partial (token ages are notebook 05's output)."""
    from toy_rl.arithmetic.comparison import comparison_checks, from_logs
    result = from_logs(ROOT / "results" / "compare" / "long-failures-partial")
    g, rows = result["gate"], {r["rule"]: r for r in result["rows"]}
    flat = " ".join(FINDINGS.read_text().split())
    assert (f"λ median {g['lambda']['q50']:.2f}, ρ before the search below ρ0 and bounds moved in "
            f"{100 * g['search_moved_frac']:.0f} % of BAPO's {g['updates']:,} updates, mean bounds "
            f"[{g['c_low_mean']:.2f}, {g['c_high_mean']:.2f}]") in flat
    assert g["rho_below_target_frac"] == g["search_moved_frac"]
    sym = rows["symmetric"]
    assert (f"symmetric clips {100 * sym['clip_frac_low']:.1f} % / {100 * sym['clip_frac_high']:.1f} %, KL "
            f"{sym['approx_kl']:.4f}") in flat
    auc = {k: f"{r['auc_accuracy']:.3f}" for k, r in rows.items()}
    assert (f"({auc['bapo']} against symmetric {auc['symmetric']}, clip-higher {auc['clip-higher']}, its mean bounds "
            f"fixed {auc['fixed@bapo-mean']})") in flat
    tested = [r for r in rows.values() if "p_holm_auc_accuracy" in r]
    best = min(tested, key=lambda r: r["p_holm_auc_accuracy"])
    assert best["rule"] == "fixed@bapo-mean"
    assert (f"smallest p_holm {best['p_holm_auc_accuracy']:.2g}, BAPO against its own mean bounds held fixed, "
            f"{100 * best['diff_auc_accuracy']:+.1f} points") in flat
    assert {v.status for v in comparison_checks(result)} == {"inconclusive"}


def test_the_rung3_comparison_reads_back_from_results_in_its_regime():
    """Notebook 06's comparison where negatives dominate reads the restarted comparison in
    results/rung3-compare/smollm2-135m-search-hard-warm (issue 26), as its cell and the rung-3 report name it: every
    logged run made its 40 updates, seeds are paired from 0, BAPO's search moves (the regime line)."""
    from toy_rl.arithmetic.comparison import from_logs
    from toy_rl.arithmetic.views import comparison_view
    from toy_rl.report.rungs import HARD
    cell = 'from_logs(RESULTS / "rung3-compare" / "smollm2-135m-search-hard-warm")'
    assert HARD == "rung3-compare/smollm2-135m-search-hard-warm" and cell in NOTEBOOK_06.read_text().replace('\\"', '"')
    result = from_logs(ROOT / "results" / HARD)
    assert result["scenario"] == "reuse-2" and result["gate"]["regime"] == "negatives-dominate"
    for rule, seeds in result["runs"].items():
        assert [r[0]["seed"] for r in seeds] == list(range(len(seeds))), rule
        assert all(r[-1]["step"] == 40 and r[-1].get("final") for r in seeds), rule
    fig, drawn = comparison_view(result, rung="Rung 3")
    counts = [f"{rule} {len(result['runs'][rule])}" for rule in drawn]
    size = (f"{len(result['seeds'])} seeds × 40 updates" if len({len(result["runs"][r]) for r in drawn}) == 1
            else "40 updates, seeds so far " + ", ".join(counts))                   # still training: per rule
    assert f"{size}; regime negatives-dominate" in fig.get_suptitle()
    assert set(drawn) == set(result["runs"]) & {"symmetric", "clip-higher", "bapo", "fixed@bapo-mean"}


def _minus(x: float, fmt: str) -> str:
    """A signed number as the docs print it: a true minus sign."""
    return format(x, fmt).replace("-", "−")


def _so_far_in(result: dict, flat: str, final: bool = False) -> None:
    """The findings' "So far" sentence of a rung-3 comparison, recomputed from its logs: each rule's accuracy averaged
    over training, BAPO − rule paired by seed with its 95 % CI and p_holm, and claim 5's status (``final``: without
    "so far", once all its runs are in)."""
    from toy_rl.lm.comparison import comparison_checks
    rows = result["rows"]
    assert "accuracy averaged over training " + ", ".join(f"{r['rule']} {r['auc_accuracy']:.3f}" for r in rows) in flat
    for r in rows[1:]:
        assert (f"BAPO − {r['rule']} {_minus(100 * r['diff_auc_accuracy'], '+.1f')} points "
                f"[{_minus(100 * r['diff_auc_accuracy_lo'], '+.1f')}, {_minus(100 * r['diff_auc_accuracy_hi'], '+.1f')}], "
                f"p_holm {r['p_holm_auc_accuracy']:.2g}") in flat, r["rule"]
    claim5 = comparison_checks(result)[0]
    assert claim5.claim == 5 and f"**claim 5 {claim5.status.split(':')[0]}{'' if final else ' so far'}**" in flat


def test_the_rung3_comparison_so_far_follows_from_the_committed_runs():
    """docs/findings.md, rung 3, "The comparison, under way": how many of the 20 runs results/ holds, the regime and
    each rule's accuracy averaged over training, BAPO − rule with its 95 % CI and p_holm, claim 5's status, recomputed;
    the restarted comparison's count of runs in results/, in the findings and README.md (issue 26)."""
    from toy_rl.arithmetic.comparison import from_logs
    result = from_logs(ROOT / "results" / "smollm2-135m-search-hard-warm")
    g, rows = result["gate"], result["rows"]
    flat = " ".join(FINDINGS.read_text().split())
    runs = sum(r["seeds"] for r in rows)
    assert f"holds {runs} of the 20 runs (" + ", ".join(f"{r['rule']} {r['seeds']}" for r in rows) + ")" in flat
    assert (f"ρ before the search below ρ0 in {100 * g['rho_below_target_frac']:.0f} % of BAPO's {g['updates']:,} "
            f"updates, bounds moved in {100 * g['search_moved_frac']:.0f} %, mean bounds [{g['c_low_mean']:.2f}, "
            f"{g['c_high_mean']:.2f}]") in flat
    _so_far_in(result, flat)
    assert (f"a paired test needs {result['seeds_for_3_points']} seeds to see 3 points (80 % power)") in flat
    from toy_rl.course.logs import run_folders
    restarted = ROOT / "results" / "rung3-compare" / "smollm2-135m-search-hard-warm"
    landed = len(run_folders(restarted)) if restarted.is_dir() else 0
    assert f"smollm2-135m-search-hard-warm) holds {landed} of its 20 runs" in flat
    if landed:
        from toy_rl.lm.comparison import comparison_checks, shared_first_rollouts
        again = from_logs(restarted)
        counts = ", ".join(f"{r['rule']} {r['seeds']}" for r in again["rows"])
        same, several = shared_first_rollouts(again)
        assert (f"holds {landed} of its 20 runs ({counts}); {same} of the {several} seeds run by two rules or more "
                f"drew the same first rollout under every rule") in flat
        g = again["gate"]
        assert (f"BAPO's search moved its bounds in {100 * g['search_moved_frac']:.0f} % of its {g['updates']} "
                f"updates, mean bounds [{g['c_low_mean']:.2f}, {g['c_high_mean']:.2f}]") in flat
        _so_far_in(again, flat, final=landed >= 20)
        assert f"a paired test needs {again['seeds_for_3_points']} seeds to see 3 points (80 % power)" in flat
        assert ("so 5 seeds can show a gap of that size" in flat) == (again["seeds_for_3_points"] <= 5)
        others = [t for t in comparison_checks(again)[0].tests if t.a != "BAPO"]     # clip-higher − symmetric
        for t in others:
            assert f"{t.a} − {t.b} {_minus(100 * t.diff, '+.1f')} points, p_holm {t.p_holm:.2g}" in flat, t
        behind = all(t.diff < 0 for t in comparison_checks(again)[0].tests if t.b == "symmetric")
        assert ("symmetric clipping ahead of both" in flat) == behind
        first = {}                                  # seed 0's first rollout and accuracy at update 0, per rule
        for path in restarted.glob("reuse-2/*/seed0/metrics.jsonl"):
            step0 = json.loads(path.read_text().splitlines()[0])
            first[path.parts[-3]] = (f"{step0['reward_mean']:.3f}", f"{100 * step0['accuracy']:.0f} %")
        assert first["bapo"] == first["symmetric"] != first["clip-higher"]
        assert f"drew one first rollout (mean reward {first['bapo'][0]})" in flat
        assert f"drew another ({first['clip-higher'][0]})" in flat
        assert first["bapo"][1] == first["clip-higher"][1] and f"both answered {first['bapo'][1]} of the held-out" in flat
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert (f"{landed} of the restarted comparison's 20 runs are in" if landed < 20
            else "all 20 of the restarted comparison's runs are in") in readme
    if landed:
        vs = next(r for r in again["rows"] if r["rule"] == "symmetric")
        seeds = {r["seeds"] for r in again["rows"]}
        assert (f"At {min(seeds)} seeds of each rule" if len(seeds) == 1 else "") in readme
        assert (f"BAPO − symmetric {_minus(100 * vs['diff_auc_accuracy'], '+.1f')} points of accuracy averaged over "
                f"training (p_holm {vs['p_holm_auc_accuracy']:.2g})") in readme
        if landed >= 20:                            # the control too, once it is in
            fixed = next(r for r in again["rows"] if r["rule"] == "fixed@bapo-mean")
            assert (f"BAPO − its own mean bounds held fixed {_minus(100 * fixed['diff_auc_accuracy'], '+.1f')} "
                    f"(p_holm {fixed['p_holm_auc_accuracy']:.2g})") in readme
