"""One-page reports: the default comparison of a rung, run through its runner (:mod:`toy_rl.report.runs`), as a
:class:`Report` (what was run, the key plots, the summary table, the verdicts on the paper's claims) that
:mod:`toy_rl.report.document` writes as Markdown or as one self-contained HTML file.

The plots are the notebooks' (:mod:`toy_rl.bandit.views`, :mod:`toy_rl.arithmetic.views`,
:mod:`toy_rl.lm.views`); the tables from the runners' summaries (:func:`toy_rl.bandit.summary_table`;
:func:`toy_rl.experiments.summarize` on rungs 2-3) with their 95% bands and paired tests by seed;
the verdicts from the functions the notebooks print them with, one per rung on the API of :mod:`toy_rl.verdicts`
(:func:`toy_rl.bandit.verdicts.claim_verdicts`, :func:`toy_rl.arithmetic.verdicts.claim_verdicts`,
:func:`toy_rl.lm.verdicts.claim_verdicts`).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path

from matplotlib.figure import Figure

from ..threads import single_thread
from .machine import describe_machine, utc_now
from .runs import (RUNG1, RUNG1_SMOKE, RUNG2_SEEDS, RUNG2_SMOKE_SEEDS, RUNG3, RUNG3_SMOKE, arithmetic_runs,
                   bandit_note, bandit_runs, llm_missing, lora_runs, runs_root)

RUNGS = (1, 2, 3)
TITLES = {1: "Rung 1 — the softmax bandit: three clipping rules under staleness",
          2: "Rung 2 — a small arithmetic transformer: three clipping rules under staleness",
          3: "Rung 3 — LoRA RL on SmolLM2-135M-Instruct: three clipping rules under staleness"}
LEADS = {
    1: ("A tabular softmax over 32 tokens per context, a few correct ones starting rare, trained by GRPO. Each batch "
        "is reused for staleness + 1 updates, so the ratio r = π/π_behaviour moves away from 1 and the clipping rule "
        "decides which tokens keep their gradient. Rules: symmetric [0.8, 1.2] (PPO/GRPO), clip-higher [0.8, 1.28] "
        "(DAPO), BAPO (bounds searched every update until positives carry ρ0 = 0.4 of the loss)."),
    2: ("A 212k-parameter GPT trained from scratch on 2-digit addition (a cached supervised warm start), then RL with "
        "each rule; one rollout serves staleness + 1 updates (reuse-K). Accuracy is greedy, on a fixed held-out set."),
    3: ("SmolLM2-135M-Instruct, offline on the CPU, with fresh LoRA adapters (rank 16 on q, k, v, o), RL on 2-digit "
        "addition with a 3-shot prompt; one rollout serves staleness + 1 updates. Accuracy is greedy, on a fixed "
        "held-out set; the on-policy clip-higher run is notebook 06's default run."),
}


class ReportError(ValueError):
    """A report that cannot be made as asked (bad rung, missing extra); the message says why."""


@dataclass
class Table:
    headers: list[str]
    rows: list[list[str]]
    note: str = ""


@dataclass
class Report:
    rung: int
    title: str
    lead: str
    facts: list[tuple[str, str]]                       # (label, value): configuration, seeds, machine, date, ...
    figures: list[tuple[str, Figure, str]]             # (name, figure, caption)
    table: Table
    verdicts: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    smoke: bool = False


# === cells ========================================================================================

def band_cell(mean, lo, hi, digits: int = 3) -> str:
    """'0.858 [0.842, 0.874]'; without a band (one seed) just the mean; 'n/a' when there is no number."""
    if mean is None or not math.isfinite(mean):
        return "n/a"
    if lo is None or hi is None or not (math.isfinite(lo) and math.isfinite(hi)):
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


def num_cell(x, digits: int = 3) -> str:
    return "–" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:.{digits}f}"


def p_cell(p) -> str:
    return "" if p is None else ("n/a" if not math.isfinite(p) else f"{p:.2g}")


def reproduce(rung: int, smoke: bool, seeds, steps) -> str:
    return (f"toy-rl report --rung {rung}" + (" --smoke" if smoke else "") + (f" --seeds {seeds}" if seeds else "")
            + (f" --steps {steps}" if steps else ""))


def check_count(name: str, value) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ReportError(f"--{name} must be an integer >= 1; got {value!r}")


# === rung 1 =======================================================================================

def _rung1(smoke, seeds, steps, runs, progress, model) -> dict:
    from ..bandit import claim_verdicts, summary_table
    from ..bandit.views import rule_bands, staleness_curves
    c = RUNG1_SMOKE if smoke else RUNG1
    seeds, steps = seeds or c["seeds"], steps or c["steps"]
    results, cfg = bandit_runs(c["stalenesses"], seeds, steps, progress=progress)
    rows = summary_table(results)
    ks = list(c["stalenesses"])
    focus = 4 if 4 in ks else ks[-1]
    fig, _ = staleness_curves({k: results[k, "symmetric"] for k in ks})
    figs = [("staleness", fig,
             "The symmetric rule at every staleness, against optimizer updates (top) and samples seen (bottom); "
             "mean and 95% band over seeds."),
            ("rules", rule_bands(results, focus)[0],
             f"The three rules at staleness {focus}: entropy, expected reward, ρ, bounds, clip fractions, gradient "
             "norm; mean and 95% band over seeds.")]
    table = Table(["staleness", "rule", "final entropy", "final reward", "mean reward", "p (mean reward)",
                   "p (final entropy)", "ρ", "c_low", "c_high", "clip low", "clip high"],
                  [[str(r["staleness"]), r["rule"],
                    band_cell(r["final_entropy"], r["final_entropy_lo"], r["final_entropy_hi"]),
                    band_cell(r["final_reward"], r["final_reward_lo"], r["final_reward_hi"]),
                    band_cell(r["mean_reward"], r["mean_reward_lo"], r["mean_reward_hi"]),
                    p_cell(r.get("p_mean_reward")), p_cell(r.get("p_final_entropy")), num_cell(r["rho"], 2),
                    num_cell(r["c_low"], 2), num_cell(r["c_high"], 2), num_cell(r["clip_frac_low"]),
                    num_cell(r["clip_frac_high"])] for r in rows],
                  "Mean over seeds [95% Student-t band]. Final entropy/reward: exact entropy (nats) and expected "
                  "reward after the last update; mean reward: expected reward averaged over all updates (learning "
                  "speed). p: Welch's t-test against symmetric at the same staleness. ρ (positive share of the loss "
                  "over gradient-carrying tokens), bounds and clip fractions: means over updates.")
    return dict(config=bandit_note(cfg, seeds) + f"; stalenesses {', '.join(map(str, ks))}", seeds=seeds,
                source="computed now (toy_rl.bandit.sweep)",
                runner=f"toy-rl bandit --rule all --staleness {' '.join(map(str, ks))} --seeds {seeds} --steps {steps}",
                figures=figs, table=table, verdicts=claim_verdicts(results),
                notes=["Verdicts: toy_rl.bandit.verdicts.claim_verdicts, as notebook 02 (§7) prints them: every part "
                       "of a claim is a t-test paired by seed, Holm-corrected across the five claims (a part counts "
                       "at p_holm < 0.05, for or against the claim); a verdict about BAPO states its regime. "
                       "Notebook 03 judges claims 3-5 again from its own experiments (fixed bounds, lowering c_low, "
                       "what ρ counts) with toy_rl.bandit.verdicts.ablation_checks; not restated here."])


# === rung 2 =======================================================================================

def _rung2(smoke, seeds, steps, runs, progress, model) -> dict:
    from ..arithmetic.sweep import scenario_names
    from ..arithmetic.verdicts import claim_verdicts
    from ..arithmetic.views import rule_bands, scenario_bands
    from ..experiments import summarize
    ks = (0, 2) if smoke else (0, 2, 4, 8)
    seeds = seeds or (RUNG2_SMOKE_SEEDS if smoke else RUNG2_SEEDS)
    results, source, note = arithmetic_runs(runs, "add", ks, seeds=seeds, steps=steps, smoke=smoke,
                                            progress=progress)
    scenarios = scenario_names(ks)
    stale = scenarios[1:]
    focus = "reuse-4" if "reuse-4" in stale else stale[-1]
    rows = summarize(results)
    figs = [("scenarios", scenario_bands(results, "symmetric", scenarios)[0],
             "The symmetric rule on-policy and at every staleness: held-out accuracy, sampled reward, entropy, "
             "gradient norm, clip fraction, KL; mean and 95% band over seeds."),
            ("rules", rule_bands(results, focus)[0],
             f"The three rules at {focus}: accuracy, reward, entropy, ρ, bounds, clip fractions, gradient norm; mean "
             "and 95% band over seeds.")]
    table = Table(["scenario", "rule", "seeds", "start acc", "final acc", "p vs symmetric", "entropy", "ρ", "c_low",
                   "c_high", "clip low", "clip high", "grad norm"],
                  [[r["scenario"], r["rule"], str(r["seeds"]), num_cell(r["start_accuracy"]),
                    band_cell(r["final_accuracy"], r["final_accuracy_lo"], r["final_accuracy_hi"]),
                    p_cell(r.get("p_vs_symmetric")), num_cell(r["entropy"]), num_cell(r["rho"], 2),
                    num_cell(r["c_low"], 2), num_cell(r["c_high"], 2), num_cell(r["clip_frac_low"]),
                    num_cell(r["clip_frac_high"]), num_cell(r["grad_norm"], 2)] for r in rows],
                  "Final acc: greedy held-out accuracy after the last update, mean over seeds [95% Student-t band]; "
                  "p: paired t-test by seed against symmetric in the same scenario (toy_rl.experiments.summarize). "
                  "Other columns: means over updates and seeds.")
    return dict(config="task add; " + note, seeds=seeds, source=source,
                runner=(f"toy-rl arithmetic --task add --rule all --staleness {' '.join(map(str, ks))} --seeds {seeds}"
                        + (f" --steps {steps}" if steps else "") + " --threads 1"),
                figures=figs, table=table, verdicts=claim_verdicts(results, stale),
                notes=["Verdicts: toy_rl.arithmetic.verdicts.claim_verdicts, as notebook 04 prints them: every part "
                       "of a claim is a t-test paired by seed, Holm-corrected across the five claims (a part counts "
                       "at p_holm < 0.05, for or against the claim); a verdict about BAPO states its regime."])


# === rung 3 =======================================================================================

def _rung3(smoke, seeds, steps, runs, progress, model) -> dict:
    from ..experiments import run_summaries, summarize
    from ..lm.run import DEFAULTS, SMOKE, binomial_se
    from ..lm.verdicts import claim_verdicts
    from ..lm.views import rules_view, staleness_view
    if model is None and llm_missing():
        raise ReportError(llm_missing())
    c = RUNG3_SMOKE if smoke else RUNG3
    seeds = seeds or c["seeds"]
    results, note = lora_runs(runs, c["stalenesses"], seeds, steps, smoke=smoke, progress=progress,
                              on_policy=True, model=model)
    summaries = run_summaries(results)
    eval_size = (SMOKE if smoke else DEFAULTS)["eval_size"]
    focus = max(c["stalenesses"])
    figs = [("rules", rules_view(summaries, focus)[0],
             f"The three rules at staleness {focus}: held-out accuracy, entropy, ρ, bounds, clip fractions, gradient "
             "norm (per-update metrics: mean of 5 updates; means over seeds)."),
            ("staleness", staleness_view(summaries, "clip-higher")[0],
             "Clip-higher on-policy and at every staleness: accuracy, entropy, gradient norm, batch reward.")]
    rows = []
    for r in summarize(results):            # p_vs_symmetric: paired t-test by seed (toy_rl.experiments.summarize)
        final = band_cell(r["final_accuracy"], r["final_accuracy_lo"], r["final_accuracy_hi"])
        if r["seeds"] == 1 and r["final_accuracy"] is not None:
            final += f" ± {binomial_se(r['final_accuracy'], eval_size):.3f} s.e."
        rows.append([str(r["staleness"]), r["rule"], str(r["seeds"]), num_cell(r["start_accuracy"], 2), final,
                     p_cell(r["p_vs_symmetric"]), num_cell(r["best_accuracy"], 2),
                     f"{num_cell(r['entropy_first'])} → {num_cell(r['entropy_last'])}",
                     num_cell(r["rho"], 2), num_cell(r["c_low"], 2), num_cell(r["c_high"], 2),
                     num_cell(r["clip_frac_low"]), num_cell(r["clip_frac_high"]), num_cell(r["seconds"], 0)])
    table = Table(["staleness", "rule", "seeds", "baseline", "final acc", "p vs symmetric", "best acc",
                   "entropy first → last", "ρ", "c_low", "c_high", "clip low", "clip high", "seconds"], rows,
                  f"Accuracy: greedy, on {eval_size} held-out problems (baseline: the untouched model); final acc is "
                  "the mean over seeds [95% band] with two or more seeds, else ± one binomial standard error. p: "
                  "paired t-test by seed against symmetric at the same staleness (toy_rl.experiments.summarize; needs "
                  "two or more seeds on both sides). Entropy: mean over the first / last 5 updates; other columns: "
                  "means over updates and seeds; seconds: training time of a run as logged, mean over seeds.")
    ks = " ".join(map(str, c["stalenesses"]))
    flags = (" --smoke" if smoke else "") + (f" --steps {steps}" if steps else "") + f" --seeds {seeds}"
    return dict(config="task add (2-digit, 3-shot plain prompt); " + note, seeds=seeds,
                source=f"toy_rl.experiments.sweep under {Path(runs)} (finished runs read back, missing ones run)",
                runner=f"toy-rl lora --rule all --staleness {ks}{flags}  and  toy-rl lora --rule clip-higher "
                       f"--staleness 0{flags}",
                figures=figs, table=table, verdicts=claim_verdicts(summaries, eval_size),
                notes=["Verdicts: toy_rl.lm.verdicts.claim_verdicts, as notebook 06 prints them: every part of a "
                       "claim is a t-test paired by seed, Holm-corrected across the five claims (a part counts at "
                       "p_holm < 0.05, for or against the claim; with one seed per rule nothing is testable); a "
                       "verdict about BAPO states its regime."])


BUILDERS = {1: _rung1, 2: _rung2, 3: _rung3}


def build_report(rung: int, smoke: bool = False, seeds: int | None = None, steps: int | None = None, runs=None,
                 progress: bool = True, model=None) -> Report:
    """Run rung ``rung``'s default comparison (smaller with ``smoke``; ``seeds``/``steps`` override it) and
    collect the report. ``runs``: root of the run folders (default ``runs``; smoke: a fresh temporary folder).
    ``model``: rung 3's model (default SmolLM2-135M-Instruct; the tests pass a tiny one)."""
    if rung not in BUILDERS:
        raise ReportError(f"--rung must be one of {', '.join(map(str, RUNGS))}; got {rung!r}")
    check_count("seeds", seeds)
    check_count("steps", steps)
    t0 = time.perf_counter()
    with single_thread(), runs_root(runs, smoke) as root:
        parts = BUILDERS[rung](smoke, seeds, steps, root, progress, model)
        machine = describe_machine()
    seconds = time.perf_counter() - t0
    facts = [("Configuration", parts["config"]), ("Seeds", f"{parts['seeds']} per rule and staleness"),
             ("Runs", parts["source"]), ("Machine", machine), ("Date", utc_now()),
             ("Time", f"{seconds:.0f} s on this machine to run (or read back) the comparison and draw its figures"),
             ("Reproduce", f"`{reproduce(rung, smoke, seeds, steps)}`"), ("Runner", f"`{parts['runner']}`")]
    title = TITLES[rung] + (" (SMOKE: tiny settings, not a result)" if smoke else "")
    return Report(rung, title, LEADS[rung], facts, parts["figures"], parts["table"], parts["verdicts"],
                  parts["notes"], smoke)
