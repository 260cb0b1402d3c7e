"""One-page reports: the default comparison of a rung, run through its runner (:mod:`toy_rl.report.runs`), as a
:class:`Report` (what was run, the key plots, the summary table, the verdicts on the paper's claims) that
:mod:`toy_rl.report.document` writes as Markdown or as one self-contained HTML file.

The plots are the notebooks' (:mod:`toy_rl.bandit.views`, :mod:`toy_rl.arithmetic.views`,
:mod:`toy_rl.lm.views`). Rungs 1 and 2 report their default comparison (the three rules and the controls on a
preset where negatives dominate: :func:`toy_rl.bandit.comparison.compare`,
:func:`toy_rl.arithmetic.comparison.compare`), with BAPO's regime, tables of paired differences by seed
(Holm-adjusted) and the verdicts on claims 5 and 6 (:func:`toy_rl.experiments.controls.control_claims`); rung 3
the same for its comparison on 'search-hard-warm', read back from results/ (20 runs of about an hour each on a CPU
core: :func:`toy_rl.lm.comparison.comparison_verdicts`), then its balanced staleness sweep on 'add'
(:func:`toy_rl.experiments.summarize`, :func:`toy_rl.lm.verdicts.claim_verdicts`).
"""
from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

from matplotlib.figure import Figure

from ..threads import single_thread
from .machine import describe_machine, utc_now
from .runs import RUNG3, RUNG3_SMOKE, arithmetic_comparison, bandit_comparison, llm_missing, lora_runs, runs_root

RUNGS = (1, 2, 3)
TITLES = {1: "Rung 1 — the softmax bandit: three clipping rules under staleness",
          2: "Rung 2 — a small arithmetic transformer: three clipping rules under staleness",
          3: "Rung 3 — LoRA RL on SmolLM2-135M-Instruct: three clipping rules under staleness"}
LEADS = {
    1: ("A tabular softmax over 32 tokens per context, a few correct ones starting rare, trained by GRPO on the "
        "default preset 'long-failures': each answer is a decision token and a continuation, 4 tokens when right and "
        "8 when wrong, so negative tokens dominate the loss (λ = 2). Stale data two ways: one batch reused for "
        "staleness + 1 updates (epoch reuse), or a behaviour policy staleness updates behind (lag). Rules: symmetric "
        "[0.8, 1.2], clip-higher [0.8, 1.28], BAPO (bounds searched every update until positives carry ρ0 = 0.4 of "
        "the loss) and the controls: fixed [0.6, 1.2], BAPO with a⁻ = 0.8, fixed [0.8, 2.0], the authors' preset, "
        "ρ0 = 0.5, and a fixed rule at BAPO's realised mean bounds."),
    2: ("A {params:,}-parameter GPT ({layers}, d_model {d_model}) trained from scratch (a cached supervised warm "
        "start), then RL with each rule and the controls on the {which}preset '{preset}': a search task whose failed "
        "answers keep trying until the token budget runs out (so negative tokens dominate the loss), a behaviour "
        "policy {staleness} updates behind. Accuracy is greedy, on {eval_size:,} held-out problems."),
    3: ("SmolLM2-135M-Instruct, offline on the CPU, with fresh LoRA adapters (rank 16 on q, k, v, o); one rollout "
        "serves staleness + 1 updates. The comparison runs where negatives dominate: 'search-hard-warm', two numbers "
        "up to 30 that sum to a target, tried aloud after a short LoRA warm start, so failed answers run to the token "
        "budget; the three rules and BAPO's mean bounds held fixed, paired by seed. The balanced control is 2-digit "
        "addition with a 3-shot prompt (one seed per rule; the on-policy clip-higher run is notebook 06's default "
        "run). Accuracy is greedy, on a fixed held-out set."),
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
    return "" if p is None else ("n/a" if not math.isfinite(p) else "< 0.001" if p < 0.001 else f"{p:.2g}")


def comparison_table(rows: list) -> Table:
    """Rungs 2 and 3's comparison table: the primary endpoint with its band, BAPO − rule and p_holm, the final
    accuracy, the bounds, clip fractions and KL, one row per rule."""
    return Table(["rule", "auc acc", "BAPO − rule", "p_holm", "final acc", "bounds", "clip low/high", "KL"],
                 [[r["rule"], band_cell(r["auc_accuracy"], r["auc_accuracy_lo"], r["auc_accuracy_hi"]),
                   num_cell(r.get("diff_auc_accuracy")), p_cell(r.get("p_holm_auc_accuracy")),
                   band_cell(r["final_accuracy"], r["final_accuracy_lo"], r["final_accuracy_hi"]),
                   f"[{r['c_low']:.2f}, {r['c_high']:.2f}]",
                   f"{100 * r['clip_frac_low']:.1f}/{100 * r['clip_frac_high']:.1f}%", num_cell(r["approx_kl"], 4)]
                  for r in rows],
                 "auc acc: greedy held-out accuracy averaged over training (the primary endpoint), final acc: after the "
                 "last update (reported); mean over seeds [95% Student-t band]. BAPO − rule: on the primary endpoint, "
                 "paired by seed; p_holm: the same test's p in the verdicts' one Holm family (claims 5 and 6); n/a: a "
                 "control no claim tests. Other columns: means over updates and seeds.")


def reproduce(rung: int, smoke: bool, seeds, steps) -> str:
    return (f"toy-rl report --rung {rung}" + (" --smoke" if smoke else "") + (f" --seeds {seeds}" if seeds else "")
            + (f" --steps {steps}" if steps else ""))


def check_count(name: str, value) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ReportError(f"--{name} must be an integer >= 1; got {value!r}")


# === rung 1 =======================================================================================

def _rung1(smoke, seeds, steps, runs, progress, model) -> dict:
    from ..bandit.comparison import cell_name, comparison_verdicts, pooled_regime
    from ..bandit.views import comparison_view
    rows, cfg, note = bandit_comparison(seeds, steps, smoke=smoke, progress=progress)
    figs = [("comparison", comparison_view(rows, "mean_reward")[0],
             "BAPO minus each rule on the expected reward averaged over training, in each cell (epoch reuse of one "
             "batch, or a behaviour policy k updates behind), paired 95% interval by seed, filled where p_holm < 0.05 "
             "(Holm over the rung's claims). Each panel names BAPO's regime in that cell.")]

    table = Table(["cell", "rule", "mean reward", "BAPO − rule", "p_holm", "final reward", "bounds", "KL"],
                  [[cell_name(r), r["rule"], band_cell(r["mean_reward"], r["mean_reward_lo"], r["mean_reward_hi"]),
                    num_cell(r.get("diff_mean_reward")), p_cell(r.get("p_holm_mean_reward")),
                    num_cell(r["final_reward"]), f"[{r['c_low']:.2f}, {r['c_high']:.2f}]",
                    num_cell(r["approx_kl"], 4)] for r in rows],
                  "Mean reward, the primary endpoint: exact expected reward averaged over all updates (learning "
                  "speed), mean over seeds [95% Student-t band]. BAPO − rule: on it, paired by seed; p_holm: the "
                  "same test's p in the verdicts' one Holm family (claims 5 and 6, every cell); n/a: a control no "
                  "claim tests. Final reward (after the last update) is reported, not tested: it saturates. Bounds "
                  "and KL: means over updates.")
    regime = pooled_regime(rows)
    return dict(config=note, seeds=len(rows[0]["seed_ids"]), source="computed now (toy_rl.bandit.comparison.compare)",
                runner=f"toy-rl bandit --compare --seeds {len(rows[0]['seed_ids'])}" + (" --smoke" if smoke else ""),
                figures=figs, table=table,
                verdicts=[regime.describe() if regime else "regime not measured", *comparison_verdicts(rows)],
                notes=["Verdicts: toy_rl.bandit.comparison.comparison_verdicts, as notebook 02 prints them (section 8): "
                       "every part is a t-test paired by seed on the primary endpoint (mean reward), Holm-corrected "
                       "across both claims and every cell; a part counts at p_holm < 0.05 and a difference of at "
                       "least 1 point, for or against the claim; claim 6 only in cells where BAPO's c_high varies.",
                       "Claims 1-4 (staleness and entropy, who dominates the batch, the bounds, ρ near ρ0) are judged "
                       "in notebooks 01-03, on the one-token balanced control and on fixed-bound ablations."])


# === rung 2 =======================================================================================

def _rung2(smoke, seeds, steps, runs, progress, model) -> dict:
    from ..arithmetic.comparison import comparison_verdicts, gate_line
    from ..arithmetic.views import comparison_view
    result, source, note = arithmetic_comparison(runs, seeds, steps, smoke=smoke, progress=progress)
    figs = [("comparison", comparison_view(result)[0],
             "Left: greedy held-out accuracy of the three rules (solid) and three fixed controls (dashed), mean and 95% "
             "band over seeds. Middle: BAPO's bounds per update. Right: BAPO minus each rule on the primary endpoint "
             "(accuracy averaged over training), paired 95% interval by seed, filled where p_holm < 0.05.")]

    table = comparison_table(result["rows"])
    need = result["seeds_for_3_points"]
    return dict(config=note, seeds=len(result["seeds"]), source=source, lead=_rung2_lead(smoke),
                # the command that makes the same runs (smoke: on one worker, as the report ran them; the full
                # runs were logged on two, which changes nothing but the time)
                runner=f"toy-rl arithmetic --compare {result['preset'].removesuffix('-smoke')} --seeds "
                       f"{len(result['seeds'])}" + (" --smoke" if smoke else " --workers 2"),
                figures=figs, table=table, verdicts=[gate_line(result), *comparison_verdicts(result)],
                notes=["Verdicts: toy_rl.arithmetic.comparison.comparison_verdicts, as notebook 04 prints them (section "
                       "11): every part is a t-test paired by seed on the primary endpoint, Holm-corrected across "
                       "both claims; a part counts at p_holm < 0.05 and a difference of at least 1 point, for or "
                       "against the claim; claim 6 only where BAPO's c_high varies.",
                       "The balanced control (2-digit addition, λ ≈ 1, where BAPO runs as fixed [0.6, 1.2]) is "
                       "notebook 04, sections 0-8.",
                       *([f"Seeds a paired test needs to see 3 points of the primary endpoint at the scatter measured "
                          f"here (80% power): {need}."] if need else [])])


def _rung2_lead(smoke: bool) -> str:
    """LEADS[2] filled in from the preset the report ran (the smoke one under ``smoke``): its model's size and
    held-out set, not the full configuration's."""
    from ..arithmetic.model import GPT
    from ..arithmetic.presets import DEFAULT, get_preset, smoke_preset
    preset = smoke_preset(DEFAULT) if smoke else get_preset(DEFAULT)
    m = preset.warmstart.model
    return LEADS[2].format(params=GPT(m).num_params(), layers=f"{m.n_layer} layer" + ("s" if m.n_layer > 1 else ""),
                           d_model=m.d_model, which="smoke version of the default " if smoke else "default ",
                           preset=preset.name, staleness=preset.rl.get("staleness"),
                           eval_size=preset.rl.get("eval_size"))


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
    add = dict(config="task add (2-digit, 3-shot plain prompt); " + note, seeds=seeds,
               source=f"toy_rl.experiments.sweep under {Path(runs)} (finished runs read back, missing ones run)",
               runner=f"toy-rl lora --rule all --staleness {ks}{flags}  and  toy-rl lora --rule clip-higher "
                      f"--staleness 0{flags}",
               figures=figs, table=table, verdicts=claim_verdicts(summaries, eval_size),
               notes=["Verdicts: toy_rl.lm.verdicts.claim_verdicts, as notebook 06 prints them: every part of a "
                      "claim is a t-test paired by seed, Holm-corrected across the five claims (a part counts at "
                      "p_holm < 0.05, for or against the claim; with one seed per rule nothing is testable); a "
                      "verdict about BAPO states its regime."])
    hard = None if smoke else _rung3_comparison()
    return add if hard is None else _with_balanced_control(hard, add)


HARD = "rung3-compare/smollm2-135m-search-hard-warm"     # rung 3's default comparison, where negatives dominate
HARD_RUNNER = ("toy-rl lora --task search-hard-warm --controls --rule symmetric clip-higher bapo --staleness 2 "
               "--seeds 5 --dtype bfloat16 --micro-batch 16 --workers 2 --out runs/rung3-compare")
HARD_RUNS = 20       # its 5 seeds of symmetric, clip-higher, BAPO and BAPO's mean bounds held fixed


def hard_bapo_configs() -> list[Path]:
    """The config.json of each BAPO run of :data:`HARD` that results/ holds (none: the comparison is not there)."""
    from ..course.logs import RESULTS
    return sorted((RESULTS / HARD).glob("*/bapo/seed*/config.json"))


def _rung3_comparison() -> dict | None:
    """Rung 3's default comparison where negatives dominate (:data:`HARD_RUNNER`, about 20 hours of one CPU core),
    read back from its logs in results/ (nothing trained): the figure, table and verdicts of notebook 06's section
    5, judged in the one grid cell run (:func:`toy_rl.lm.comparison.comparison_checks`). None while results/ holds
    none of its runs."""
    from ..arithmetic.comparison import from_logs, gate_line
    from ..arithmetic.views import comparison_view
    from ..course.logs import RESULTS, run_folders
    from ..lm.comparison import comparison_verdicts
    folder, configs = RESULTS / HARD, hard_bapo_configs()
    if not configs:
        return None
    result, cfg = from_logs(folder), json.loads(configs[0].read_text())
    seeds = ", ".join(f"{rule} {len(runs)}" for rule, runs in result["runs"].items())
    landed = len(run_folders(folder))
    fig = comparison_view(result, rung="Rung 3")[0]
    interim = [] if landed >= HARD_RUNS else [
        f"Interim look: {landed} of the {HARD_RUNS} runs have landed (5 seeds of each rule and of BAPO's control); "
        "the verdicts change as runs land and are final only when all are in."]
    return dict(
        config=(f"task search-hard-warm (numbers up to 30, from a 50-update LoRA warm start), {result['scenario']}: "
                f"{cfg['steps']} updates of {cfg['prompts']} prompts x {cfg['group_size']} answers, lr {cfg['lr']}, "
                f"{cfg['dtype']}, held-out accuracy on {cfg['eval_size']} problems every {cfg['eval_every']} updates"),
        seeds=f"per rule: {seeds} (search-hard-warm)", runner=HARD_RUNNER,
        source=(f"results/{HARD} (the committed logs, read back; nothing trained; every run from the warm start "
                f"committed in results/warm-starts/, " + (f"{landed} of the {HARD_RUNS} runs landed so far)"
                                                            if landed < HARD_RUNS else f"all {HARD_RUNS} runs landed)")),
        figures=[("comparison", fig, "Where negatives dominate (search-hard-warm). Left: greedy held-out accuracy per "
                  "rule, mean and 95% band over seeds. Middle: BAPO's bounds per update. Right: BAPO minus each rule "
                  "on the primary endpoint (accuracy averaged over training), paired 95% interval by seed, filled "
                  "where p_holm < 0.05.")],
        table=comparison_table(result["rows"]), verdicts=[gate_line(result), *comparison_verdicts(result)],
        notes=[*interim,
               "Verdicts: toy_rl.lm.comparison.comparison_verdicts, as notebook 06 prints them (section 5): every "
               "part is a t-test paired by seed on the primary endpoint, Holm-corrected across both claims; a part "
               "counts at p_holm < 0.05 and a difference of at least 1 point. Only the preset's step size was run, "
               "one cell of the step-size grid rungs 1 and 2 are judged on, so no claim is called supported or "
               "contradicted across it."])


def _with_balanced_control(hard: dict, add: dict) -> dict:
    """The report of rung 3: its comparison where negatives dominate first; the `add` runs (one seed per rule,
    balanced: BAPO runs as the fixed rule [0.6, 1.2]) after it, their figures and verdicts named as such (their
    table is notebook 06's section 5)."""
    tag = "add, the balanced control: "
    return dict(hard, lead=LEADS[3], config=f"{hard['config']}; balanced control: {add['config']}",
                seeds=f"{hard['seeds']}; add: {add['seeds']} per rule and staleness",
                runner=f"{hard['runner']}  and  {add['runner']}", source=f"{hard['source']}; add: {add['source']}",
                figures=[*hard["figures"], *((name, fig, tag + caption) for name, fig, caption in add["figures"])],
                verdicts=[*hard["verdicts"], *(tag + v for v in add["verdicts"])],
                notes=[*hard["notes"], tag + add["notes"][0]])


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
    per_rule = parts["seeds"] if isinstance(parts["seeds"], str) else f"{parts['seeds']} per rule and staleness"
    facts = [("Configuration", parts["config"]), ("Seeds", per_rule),
             ("Runs", parts["source"]), ("Machine", machine), ("Date", utc_now()),
             ("Time", f"{seconds:.0f} s on this machine to run (or read back) the comparison and draw its figures"),
             ("Reproduce", f"`{reproduce(rung, smoke, seeds, steps)}`"), ("Runner", f"`{parts['runner']}`")]
    title = TITLES[rung] + (" (SMOKE: tiny settings, not a result)" if smoke else "")
    return Report(rung, title, parts.get("lead", LEADS[rung]), facts, parts["figures"], parts["table"], parts["verdicts"],
                  parts["notes"], smoke)
