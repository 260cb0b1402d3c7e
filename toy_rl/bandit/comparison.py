"""Rung 1's default comparison: the three rules and the protocol's controls, tested by seed.

    from toy_rl.bandit.comparison import compare, format_rows
    rows = compare("long-failures", seeds=range(20))          # 2–7 min on one thread of a shared 2-core CPU
    print(format_rows(rows))

What runs (docs/protocol.md, sections 3, 4 and 6), at staleness 2 and 4 of both
kinds (``mode="reuse"``: epoch reuse of one batch; ``mode="lag"``: a fresh batch
from the policy k updates old), all on the same seeds:

    symmetric [0.8, 1.2], clip-higher [0.8, 1.28], BAPO (§5.1 defaults),
    fixed [0.6, 1.2]        BAPO's starting point: is the search doing anything?
    BAPO a⁻ = 0.8           does the low start of c_low matter more than the adaptivity?
    fixed at BAPO's mean    adaptive bounds vs the same bounds held fixed (BAPO's realised
                            mean c_low, c_high in that cell, over seeds and the updates where
                            a bound can clip: stale, with advantage mass; :func:`realised_bounds`)
    fixed [0.8, 2.0]        a wide upper bound alone
    BAPO authors' code      ``BAPO.authors_code()`` (paper_vs_code.md, section 4)
    BAPO ρ0 = 0.5           sensitivity to the target

Endpoints, one number per seed: ``mean_reward`` (exact expected reward averaged over all
updates: the learning speed) is the **primary** endpoint, the one the claims are tested on; it
can move. ``final_reward`` (after the last update) and ``p_best`` (share of contexts whose best
tokens end with more than half the probability, :func:`toy_rl.bandit.policy.best_found`) are
reported beside it but saturate on the default presets (final reward 0.98-0.997 and P(best) = 1
for every rule: they cannot tell rules apart, so testing them only inflated the family). A
difference under 1 point of expected reward counts neither for nor against a claim. Claims 5 and
6 are tested paired by seed (``toy_rl.stats.paired_test``, difference BAPO − rule) and Holm-adjusted
as one family (:func:`comparison_checks`); the table prints the same p_holm for the tests it shows,
and "n/a" for a control no claim uses (its difference and interval are shown, untested). Each
cell also carries the pilot gate of its BAPO run (``regime``):
in the balanced regime BAPO is the fixed rule [0.6, 1.2] and its rows say nothing about
adaptive clipping.

A wider trust region is also a bigger step (protocol.md, section 3): :func:`step_size_sweep`
runs each rule over a grid of η and :func:`tuned_comparison` compares the rules each at its
own best η (chosen on separate tuning seeds) and at matched KL per update.
"""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from ..clipping import BAPO, ClipHigher, FixedBounds, Symmetric
from ..experiments import compare as shared
from ..experiments.compare import band_columns, paired_columns, with_family_p
from ..experiments.controls import MEAN_BOUNDS, c_high_spread, control_claims, control_rules, mean_bounds_rule
from ..experiments.table import band_text, diff_text, p_text
from ..verdicts import Regime, judge, regime_name, verdict_line
from .config import BanditConfig
from .pilot import run_summary
from .policy import best_found
from .presets import DEFAULT, as_config
from .simulate import check_seeds, simulate

ENDPOINTS = ("final_reward", "p_best", "mean_reward")
PRIMARY = "mean_reward"      # the endpoint the claims are tested on (the other two saturate: module docstring)
CELLS = tuple((mode, k) for mode in ("reuse", "lag") for k in (2, 4))


def per_seed_scores(run) -> dict:
    """The endpoints of one run, one value per seed, plus the means over updates of the bounds and the KL."""
    m = run.metrics
    return dict(final_reward=m["expected_reward"][:, -1],
                p_best=best_found(run.final_logits, run.extra["task"].correct).cpu().numpy(),
                mean_reward=m["expected_reward"].mean(1),
                c_low=m["c_low"].mean(1), c_high=m["c_high"].mean(1), approx_kl=m["approx_kl"].mean(1))


def _active(run):
    """The updates where a bound could clip: the batch is stale (staleness > 0; on-policy r ≡ 1 and no bound
    clips) and carries advantage mass (ρ defined)."""
    m = run.metrics
    return np.isfinite(m["rho_before"]) & (m["staleness"] > 0)


def realised_bounds(run) -> tuple:
    """BAPO's mean (c_low, c_high) over the seeds and the updates where a bound could clip (:func:`_active`: stale,
    with advantage mass): :func:`toy_rl.experiments.compare.realised_bounds`."""
    return shared.realised_bounds(run.metrics["c_low"], run.metrics["c_high"], _active(run))


def run_cell(config: BanditConfig, rules: dict, seeds) -> dict:
    """Every rule on one configuration, same seeds: {label: BanditRun}; adds the fixed rule at BAPO's mean bounds."""
    runs = {label: simulate(config, rule, seeds) for label, rule in rules.items()}
    if "bapo" in runs:
        lo, hi = realised_bounds(runs["bapo"])
        runs[MEAN_BOUNDS] = simulate(config, mean_bounds_rule(lo, hi), seeds)
    return runs


def cell_rows(runs: dict, reference: str = "bapo", **cell) -> list:
    """One row per rule: endpoint means with 95% bands, mean bounds and KL, and paired tests against
    ``reference`` (diff = reference − rule; p before Holm)."""
    scores = {label: per_seed_scores(run) for label, run in runs.items()}
    gate = run_summary(runs[reference]) if reference in runs else {}
    rows = []
    for label, s in scores.items():
        row = dict(cell, rule=label, rule_repr=repr(runs[label].extra["rule_obj"]), seeds=len(runs[label].seeds),
                   regime=gate.get("regime"), bapo_moved_frac=gate.get("search_moved_frac"),
                   bapo_below_frac=gate.get("rho_below_target_frac"), bapo_updates=gate.get("updates"),
                   seed_ids=[int(x) for x in runs[label].seeds],
                   per_seed={name: [float(v) for v in s[name]] for name in ENDPOINTS})
        if label == reference:
            row["c_high_sd"] = c_high_spread(runs[label].metrics["c_high"], _active(runs[label]))
        for name, values in s.items():
            row.update(band_columns(name, values))
        if label != reference and reference in scores:             # every rule ran the same seeds, in one order
            row.update(paired_columns(scores[reference], s, ENDPOINTS))
        rows.append(row)
    return rows


def with_verdicts_p(rows: list) -> list:
    """``rows`` with each test's p_holm taken from the rung's one Holm family (the verdicts of
    :func:`comparison_checks`): the table and the verdicts print the same p_holm."""
    return with_family_p(rows, comparison_checks(rows), ENDPOINTS, cell_of=cell_name)


def compare(config=DEFAULT, seeds=range(10), cells=CELLS, rules: dict | None = None, steps: int | None = None,
            progress: bool = False) -> list:
    """The default comparison (module docstring): rows for every (mode, staleness) cell and rule, Holm-adjusted.

    Args:
        config: a preset name (default "long-failures") or a BanditConfig.
        seeds: the seeds, shared by every rule (pairs for the tests).
        cells: (mode, staleness) pairs; default reuse and lag at 2 and 4.
        rules: {label: rule}; default :func:`control_rules` (the fixed rule at BAPO's mean is added).
        steps: override ``config.steps``.
    """
    config = as_config(config)
    seeds = check_seeds(seeds)
    rules = control_rules() if rules is None else dict(rules)
    if steps is not None:
        config = replace(config, steps=steps)
    rows = []
    cells = list(cells)
    from ..timing import announce, quiet
    from .backend import comparison_seconds as bandit_seconds
    announce(f"training the bandit comparison ({len(rules) + 1} rules x {len(cells)} cells x {len(seeds)} seeds x "
             f"{config.steps} updates)", bandit_seconds(len(seeds), config.steps, len(cells), len(rules) + 1))
    with quiet():
        for mode, k in cells:
            if progress:
                print(f"cell {mode} k={k}", flush=True)
            runs = run_cell(replace(config, mode=mode, staleness=k), rules, seeds)
            rows += cell_rows(runs, mode=mode, staleness=k)
    return with_verdicts_p(rows)


def cell_name(row: dict) -> str:
    """'epoch reuse 2' or 'lag 4': a cell as the verdicts name it."""
    return f"{'epoch reuse' if row['mode'] == 'reuse' else row['mode']} {row['staleness']}"


def pooled_regime(rows: list, reference: str = "bapo") -> Regime | None:
    """BAPO's regime over every cell of the table (each cell's share of updates below ρ0 and of updates whose bounds
    moved, weighted by its updates); None without BAPO rows."""
    gates = [r for r in rows if r["rule"] == reference and r.get("bapo_below_frac") is not None]
    if not gates:
        return None
    n = np.array([r["bapo_updates"] for r in gates], dtype=float)
    below = float(np.average([r["bapo_below_frac"] for r in gates], weights=n))
    moved = float(np.average([r["bapo_moved_frac"] for r in gates], weights=n))
    return Regime(regime_name(below), below, moved, int(n.sum()))


def comparison_checks(rows: list, endpoints=(PRIMARY,)) -> list:
    """Claims 5 and 6 (:func:`toy_rl.experiments.controls.control_claims`) in every cell of :func:`compare`'s rows,
    on the primary endpoint, paired by seed, Holm across all of them (:func:`toy_rl.verdicts.judge`: the rung's
    one family); a difference under 1 point counts neither way; claim 6 only in the cells where BAPO's c_high
    varied (SD > 0.1 over stale updates). The regime is BAPO's over all cells (:func:`pooled_regime`); each
    cell's own is in the detail."""
    cells = {}
    for r in rows:
        cells.setdefault(cell_name(r), {})[r["rule"]] = {
            seed: {e: r["per_seed"][e][i] for e in endpoints} for i, seed in enumerate(r["seed_ids"])}
    detail = "per cell: " + ", ".join(f"{cell_name(r)} {r['regime']} (bounds moved in {r['bapo_moved_frac']:.0%})"
                                      for r in rows if r["rule"] == "bapo")
    spread = {cell_name(r): r["c_high_sd"] for r in rows if r["rule"] == "bapo" and "c_high_sd" in r}
    return judge(control_claims(cells, endpoints, pooled_regime(rows), detail, scale=100, unit=" points",
                                c_high_sd=spread or None))


def comparison_verdicts(rows: list, endpoints=(PRIMARY,)) -> list[str]:
    """:func:`comparison_checks` as the lines notebooks and reports print."""
    return [verdict_line(v) for v in comparison_checks(rows, endpoints)]


STEP_FACTORS = (0.5, 1.0, 2.0, 4.0)


def step_size_sweep(config=DEFAULT, rules: dict | None = None, lrs=STEP_FACTORS, seeds=range(6),
                    staleness: int = 2, mode: str = "reuse") -> list:
    """Each rule at each η = ``config.lr`` × factor in ``lrs``: rows with the per-seed endpoint means and the
    mean KL per update (approx_kl). Factors, not absolute values, so one grid serves every preset."""
    config = as_config(config)
    seeds = check_seeds(seeds)
    rules = rules or dict(symmetric=Symmetric(), **{"clip-higher": ClipHigher()}, bapo=BAPO())
    if not lrs or any(not (isinstance(f, (int, float)) and f > 0) for f in lrs):
        raise ValueError(f"lrs must be positive factors of config.lr; got {lrs!r}")
    rows = []
    for label, rule in rules.items():
        for factor in lrs:
            cfg = replace(config, lr=config.lr * factor, staleness=staleness, mode=mode)
            s = per_seed_scores(simulate(cfg, rule, seeds))
            rows.append(dict(rule=label, lr=cfg.lr, factor=factor, **{k: float(np.mean(v)) for k, v in s.items()}))
    return rows


def best_step(rows: list, metric: str = "final_reward") -> dict:
    """{rule: η} with the highest mean ``metric`` in :func:`step_size_sweep`'s rows (ties: the smaller η)."""
    best = {}
    for row in sorted(rows, key=lambda r: r["lr"]):
        if row["rule"] not in best or row[metric] > best[row["rule"]][metric]:
            best[row["rule"]] = row
    return {rule: row["lr"] for rule, row in best.items()}


def matched_kl_step(rows: list, target: float | None = None) -> dict:
    """{rule: η} whose mean KL per update is closest (in log) to ``target`` (default: the geometric mean of every
    row's KL), so that rules are compared at the same size of step rather than the same η."""
    kls = [r["approx_kl"] for r in rows if r["approx_kl"] > 0]
    if not kls:
        raise ValueError("no row has a positive approx_kl (on-policy runs cannot be matched by KL)")
    target = float(np.exp(np.mean(np.log(kls)))) if target is None else target
    out = {}
    for rule in dict.fromkeys(r["rule"] for r in rows):
        mine = [r for r in rows if r["rule"] == rule and r["approx_kl"] > 0]
        out[rule] = min(mine, key=lambda r: abs(math.log(r["approx_kl"] / target)))["lr"]
    return out


def tuned_comparison(config=DEFAULT, rules: dict | None = None, lrs=STEP_FACTORS, tune_seeds=range(100, 106),
                     seeds=range(10), staleness: int = 2, mode: str = "reuse", metric: str = "final_reward") -> dict:
    """Compare rules each at its own step size: the best η for ``metric`` and the η of matched KL, both picked on
    ``tune_seeds`` (disjoint from ``seeds``, so picking cannot flatter the test), then tested on ``seeds``.

    Returns {"sweep": rows, "best": {rule: η}, "best_at_edge": [rules whose best η is the smallest or largest of
    the grid: widen it], "matched_kl": {rule: η}, "rows_best": [...], "rows_kl": [...]}, the last two
    Holm-adjusted tables of :func:`cell_rows` (BAPO as the reference)."""
    config = as_config(config)
    rules = rules or dict(symmetric=Symmetric(), **{"clip-higher": ClipHigher()}, bapo=BAPO())
    if set(check_seeds(tune_seeds)) & set(check_seeds(seeds)):
        raise ValueError("tune_seeds and seeds must be disjoint (pick the step on other seeds than you test on)")
    sweep_rows = step_size_sweep(config, rules, lrs, tune_seeds, staleness, mode)
    out = dict(sweep=sweep_rows, best=best_step(sweep_rows, metric), matched_kl=matched_kl_step(sweep_rows))
    grid = sorted({row["lr"] for row in sweep_rows})
    out["best_at_edge"] = [rule for rule, lr in out["best"].items() if len(grid) > 1 and lr in (grid[0], grid[-1])]
    base = replace(config, staleness=staleness, mode=mode)
    for key in ("best", "matched_kl"):
        runs = {label: simulate(replace(base, lr=out[key][label]), rule, seeds) for label, rule in rules.items()}
        rows = cell_rows(runs, mode=mode, staleness=staleness, step=key)
        for row in rows:
            row["lr"] = out[key][row["rule"]]
        out[f"rows_{'kl' if key == 'matched_kl' else key}"] = with_verdicts_p(rows)
    return out


def format_rows(rows: list) -> str:
    """A fixed-width table, one row per cell and rule: the primary endpoint (mean reward, ± 95% half-width),
    BAPO − rule on it with its interval and its p_holm from the verdicts' family ("n/a": a control no claim
    tests), the final reward (saturated: for reading, not testing), the mean bounds and the KL per update."""
    head = ["cell", "rule", "mean R", "BAPO − rule [95% CI]", "p_holm", "final R", "bounds", "KL"]
    lines = [head]
    for r in rows:
        lines.append([f"{r.get('mode', '')} {r.get('staleness', '')}".strip(), r["rule"], band_text(r, PRIMARY),
                      diff_text(r, PRIMARY), p_text(r[f"p_holm_{PRIMARY}"]) if f"diff_{PRIMARY}" in r else "",
                      f"{r['final_reward']:.3f}", f"[{r['c_low']:.2f}, {r['c_high']:.2f}]", f"{r['approx_kl']:.4f}"])
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip() for line in lines)
