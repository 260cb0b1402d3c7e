"""The key plot of each notebook (00-07), rendered from its full configuration into small PNGs with a caption
each: ``toy-rl figures [--only NAME ...] [--out DIR | --overwrite] [--smoke]`` (docs/figures, the default
``--out``, holds the committed figures: replacing them takes ``--overwrite``).

Every figure is drawn by the function its notebook calls (:mod:`toy_rl.surrogate`, :mod:`toy_rl.bandit.views`,
:mod:`toy_rl.arithmetic.views`, :mod:`toy_rl.lm.views`) on runs made by the existing runners
(:mod:`toy_rl.report.runs`, through :mod:`toy_rl.experiments`): the long ones (rung 2's sweep, rung 3's LoRA
runs) are read back from their run folders under ``runs/`` (``runs/arithmetic-add``, ``runs/smollm2-135m-add``,
...) when they are finished there, so regenerating the figures reruns nothing that is done; rung 3's comparison
where negatives dominate (about 20 hours of one CPU core) is drawn from its logs committed in results/.

Beside the PNGs: ``captions.json`` (per figure: caption, configuration, where the runs came from, seconds, size,
machine, date, command) and ``README.md`` (the figures with their captions). ``--only`` regenerates some
figures and keeps the others' entries. ``smoke=True`` draws tiny versions (for tests: a few seconds each) and
refuses to write into ``docs/figures``.
"""
from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from matplotlib.figure import Figure
from tqdm.auto import tqdm

from ..experiments.controls import MEAN_BOUNDS
from ..experiments.plan import Plan
from ..threads import single_thread
from ..timing import up_front
from .machine import describe_machine, utc_now
from .png import png_bytes
from .runs import (RUNG1, RUNG1_SMOKE, RUNG3, RUNG3_SMOKE, arithmetic_comparison, arithmetic_comparison_plan,
                   arithmetic_runs, arithmetic_runs_plan, bandit_comparison, bandit_comparison_plan, bandit_note,
                   llm_missing, lora_plan, lora_runs, runs_root)

DOCS_FIGURES = Path("docs/figures")
SMOKE_OUT = Path("runs/figures-smoke")        # the command's default for --smoke (runs/ is not committed)
FOCUS = 4              # the staleness the rule-by-rule figures show (notebooks 02, 04, 06)
PARTIAL_BUDGET = 8     # notebook 05's token budget per answer per step


class Unavailable(RuntimeError):
    """A figure that cannot be drawn on this machine (e.g. rung 3 without the llm extra); the message says why."""


@dataclass(frozen=True)
class FigureSpec:
    name: str
    notebook: str
    title: str
    build: Callable[..., tuple[Figure, dict]]    # (smoke, runs root, progress, model) -> (figure, caption parts)
    plan: Callable[..., Plan] | None = None      # (smoke, runs root, model) -> what build will train (toy_rl.experiments.plan)


# === the builders: each returns (figure, {"what", "config", "source"}) ===========================================

def _clipping(smoke: bool, runs: Path, progress: bool, model=None):
    from ..surrogate import compare_rules, plot_surrogate
    from ..synthetic import stale_batch
    from ..tour import default_rules
    sizes = dict(n_prompts=8, max_tokens=64) if smoke else dict(n_prompts=64, max_tokens=256)
    batch = stale_batch(drift=0.3, group_size=8, seed=0, **sizes)
    rules = default_rules()
    stats = compare_rules(batch, rules)
    fig = Figure(figsize=(11, 9), layout="constrained")
    for row, (name, rule) in zip(fig.subplots(3, 2, sharex=True), rules.items()):
        ranges = (rule.low_range, rule.high_range) if name == "bapo" else None
        plot_surrogate(row, stats[name]["c_low"], stats[name]["c_high"], label=name, search_ranges=ranges)
    b = stats["bapo"]
    return fig, dict(
        what=("The clipped surrogate min(r·A, clip(r)·A) of each rule at the bounds it used, for A > 0 (left) and "
              "A < 0 (right); shaded green: where a token still sends a gradient. BAPO's search moved its bounds "
              f"to [{b['c_low']:.2f}, {b['c_high']:.2f}] (ρ {b['rho_before']:.2f} → {b['rho']:.2f}, target 0.4)"),
        config=(f"one synthetic stale GRPO batch (toy_rl.synthetic.stale_batch: {sizes['n_prompts']} prompts × 8 "
                f"answers, up to {sizes['max_tokens']} tokens, drift 0.3 = std of log r, seed 0)"),
        source="computed now (a fraction of a second)")


def _entropy_rule(smoke: bool, runs: Path, progress: bool, model=None):
    from ..bandit.views import entropy_rule_scatter
    n = 1500 if smoke else 10_000
    fig, signs = entropy_rule_scatter(n, 16, 0, eta=0.01)
    return fig, dict(
        what=("The Entropy-Clip Rule checked on random softmaxes: exact one-step entropy change against its "
              f"first-order prediction. Sign agreement: natural step vs the printed form {signs['paper_natural']:.1%}, "
              f"vanilla step vs its own form {signs['paper_vanilla']:.1%}, vanilla step vs the printed form "
              f"{signs['paper_form_on_vanilla_step']:.1%} (the dropped π factor)"),
        config=f"{n} random instances, K = 16 tokens, η = 0.01, seed 0 (toy_rl.bandit.views.entropy_rule_scatter)",
        source="computed now")


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:]


def _bandit_rules(smoke: bool, runs: Path, progress: bool, model=None):
    from ..bandit.comparison import pooled_regime
    from ..bandit.views import comparison_view
    rows, _, note = bandit_comparison(smoke=smoke, progress=progress)
    fig, _ = comparison_view(rows, "mean_reward")
    mean = {(r["mode"], r["staleness"], r["rule"]): r["mean_reward"] for r in rows}
    at = [(m, k) for m, k in (("reuse", 4), ("lag", 4)) if (m, k, "bapo") in mean]
    regime = pooled_regime(rows)
    return fig, dict(
        what=("Rung 1's default comparison: BAPO minus each rule and control on the expected reward averaged over "
              "training, per cell, paired 95% interval by seed (filled: p_holm < 0.05, Holm over the rung's claims). "
              + (_sentence(regime.describe()) + ". " if regime else "")
              + "Mean reward at staleness 4: " + "; ".join(
                  f"{'epoch reuse' if m == 'reuse' else m} — " + ", ".join(
                      f"{r} {mean[m, k, r]:.3f}" for r in ("symmetric", "clip-higher", "bapo", "fixed[0.8,2.0]",
                                                          MEAN_BOUNDS) if (m, k, r) in mean) for m, k in at)),
        config=note, source="computed now (toy_rl.bandit.comparison.compare)")


def _bapo_balance(smoke: bool, runs: Path, progress: bool, model=None):
    from ..bandit import BanditConfig, simulate
    from ..bandit.replay import replay_batches
    from ..bandit.views import rho_bound_figure
    c = RUNG1_SMOKE if smoke else RUNG1
    cfg = BanditConfig(steps=c["steps"], staleness=FOCUS)     # one symmetric run, its batches replayed
    run = simulate(cfg, "symmetric", range(c["seeds"]), keep_logits=True)
    fig, curves = rho_bound_figure(replay_batches(run), rho0=0.4)
    subset = "ρ below target"
    low = {k: curves.get(("c_low", k, subset)) for k in ("grad", "all")}
    n, total = curves["batches"].get(subset, 0), curves["batches"].get("all batches", 0)
    moved = (f"Mean over the {n:,} of {total:,} batches whose gradient-carrying ρ starts below ρ0 = 0.4 (the ones "
             "BAPO's search acts on; dotted: all batches): "
             + "; ".join(f"count={k!r}: c_low 0.6 → 0.9 moves ρ {v[0]:.3f} → {v[-1]:.3f}"
                         for k, v in low.items() if v is not None))
    return fig, dict(
        what=("What BAPO's ρ counts decides what its bounds do: ρ against c_low (left) and c_high (right) on the "
              "batches of a stale symmetric run, counting only gradient-carrying tokens (green, BAPO's default) or "
              f"all tokens (red, Eq. 8 and the authors' code). {moved}"),
        config=bandit_note(cfg, c["seeds"]) + f", staleness {FOCUS}, symmetric rule, every batch replayed",
        source="computed now (toy_rl.bandit.simulate + toy_rl.bandit.views.replay_batches)")


def _regime(results: dict, scenario: str) -> str:
    """' BAPO's regime: …' of the BAPO runs of ``scenario`` in a sweep's {(scenario, rule): [records]}, for a
    caption (in a balanced regime BAPO ran as the fixed rule [0.6, 1.2], and the caption says so)."""
    from ..experiments.pilot import records_regime
    bapo = results.get((scenario, "bapo"), [])
    if not bapo:
        return ""
    regime = records_regime(bapo)
    fixed = " — BAPO ran as the fixed rule [0.6, 1.2] here" if regime.ran_as_fixed else ""
    return f". BAPO's {regime.describe()}{fixed}"


def _arithmetic_rules(smoke: bool, runs: Path, progress: bool, model=None):
    from ..arithmetic.comparison import gate_line
    from ..arithmetic.views import comparison_view
    result, source, note = arithmetic_comparison(runs, smoke=smoke, progress=progress)
    fig, _ = comparison_view(result)
    auc = {r["rule"]: r["auc_accuracy"] for r in result["rows"]}
    return fig, dict(
        what=("Rung 2's default comparison on the 211,520-parameter GPT: greedy held-out accuracy of the three rules and "
              "three fixed controls (95% bands over seeds), BAPO's bounds per update, and BAPO minus each rule on the "
              "primary endpoint (accuracy averaged over training; paired 95% interval by seed, filled where "
              "p_holm < 0.05). " + _sentence(gate_line(result)) + ". Accuracy averaged over training: "
              + ", ".join(f"{r} {auc[r]:.3f}" for r in ("symmetric", "clip-higher", "bapo", "fixed[0.8,2.0]",
                                                         MEAN_BOUNDS) if r in auc)),
        config=note, source=source)


def _partial_rollout(smoke: bool, runs: Path, progress: bool, model=None):
    from ..arithmetic.views.training import KEY_PANELS, rule_bands
    results, source, note = arithmetic_runs(runs, "scratchpad", (), partial=PARTIAL_BUDGET, smoke=smoke,
                                            progress=progress)
    scenario = f"partial-{PARTIAL_BUDGET}"
    fig, means = rule_bands(results, scenario, KEY_PANELS)
    return fig, dict(
        what=(f"Rung 2 under partial rollout: at most {PARTIAL_BUDGET} new tokens per answer per step, unfinished "
              "answers resumed by the next policy, so one answer mixes policy versions; the three rules, 95% bands "
              "over seeds. Mean held-out accuracy over training: "
              + ", ".join(f"{r} {m['accuracy']:.3f}" for r, m in means.items()) + _regime(results, scenario)),
        config=f"task scratchpad, {scenario}; " + note, source=source)


def _lora_rules(smoke: bool, runs: Path, progress: bool, model=None):
    """Rung 3's comparison where negatives dominate, from its committed logs (:func:`_hard_comparison`); in smoke
    mode, or before results/ holds it, the three rules on `add` at staleness 4, trained or read back."""
    hard = None if smoke or model is not None else _hard_comparison()
    if hard is not None:
        return hard
    from ..experiments import run_summaries
    from ..lm.views.runs import KEY_PANELS, rules_view
    missing = llm_missing() if model is None else None
    if missing:
        raise Unavailable(missing)
    c = RUNG3_SMOKE if smoke else RUNG3
    k = max(c["stalenesses"]) if smoke else FOCUS
    results, note = lora_runs(runs, (k,), c["seeds"], smoke=smoke, progress=progress, model=model)
    fig, means = rules_view(run_summaries(results), k, panels=KEY_PANELS)
    return fig, dict(
        what=(f"Rung 3, LoRA RL on {'SmolLM2-135M-Instruct' if model is None else 'a test model'} (2-digit "
              f"addition, 3-shot prompt) at staleness {k}, the "
              "three rules (per-update metrics: mean of 5). Final held-out accuracy: "
              + ", ".join(f"{r} {m['final_accuracy']:.2f}" for r, m in means.items())
              + _regime(results, f"reuse-{k}")),
        config=f"staleness {k} (reuse); " + note,
        source=f"toy_rl.experiments.sweep under {runs} (finished runs read back, missing ones run)")


def _hard_comparison():
    """(figure, caption parts) of rung 3's default comparison (``search-hard-warm``, where negatives dominate),
    drawn as notebook 06's section 5 draws it from the logs in results/ (nothing trained); None while results/ holds
    none of its runs."""
    from ..arithmetic.comparison import from_logs
    from ..arithmetic.views import comparison_view
    from ..course.logs import RESULTS, run_folders
    from .rungs import HARD, HARD_RUNNER, HARD_RUNS, hard_bapo_configs
    if not hard_bapo_configs():
        return None
    folder = RESULTS / HARD
    result, landed = from_logs(folder), len(run_folders(folder))
    fig, drawn = comparison_view(result, rung="Rung 3")
    g = result["gate"]
    interim = "" if landed >= HARD_RUNS else f" Interim: {landed} of the {HARD_RUNS} runs have landed"
    return fig, dict(
        what=("Rung 3 where negatives dominate: LoRA RL on SmolLM2-135M-Instruct, task search-hard-warm (wrong "
              "answers run longer), staleness 2. Left: greedy held-out accuracy per rule, mean and 95% band over "
              "seeds; middle: BAPO's bounds per update; right: BAPO minus each rule on accuracy averaged over "
              "training, paired 95% interval by seed (filled where p_holm < 0.05). Accuracy averaged over "
              "training: " + ", ".join(f"{r['rule']} {r['auc_accuracy']:.3f}" for r in result["rows"])
              + f". Regime {g['regime']}: BAPO's bounds moved in {100 * g['search_moved_frac']:.0f}% of its "
              f"{g['updates']} updates" + ("." + interim if interim else "")),
        config=(f"{HARD_RUNNER}; seeds per rule: "
                + ", ".join(f"{rule} {len(result['runs'][rule])}" for rule in drawn)),
        source=f"results/{HARD} (the committed logs, read back; nothing trained)")


def _minibatches(smoke: bool, runs: Path, progress: bool, model=None):
    from ..bandit import BanditConfig
    from ..bandit.questions.minibatches import minibatch_experiment
    from ..bandit.questions.views import minibatch_figure
    seeds, steps = (3, 60) if smoke else (16, 300)            # notebook 07's parameters cell
    out = minibatch_experiment(BanditConfig(steps=steps), range(seeds))
    rows = out["rows"]
    return minibatch_figure(out), dict(
        what=("Notebook 07 §2 (verl#791, DAPO#11: does clip-higher act with one PPO epoch?): one epoch per rollout "
              "split into 1-8 mini-batches. Left: the symmetric rule's share of A > 0 tokens above c_high, by "
              "mini-batch of the epoch — the first, on fresh data, never clips; the later ones do. Right: entropy "
              "of clip-higher minus symmetric on the same seeds (95% bands). Clip fraction high on the later "
              "mini-batches: " + ", ".join(f"{name} {row['high_later']:.4f}" for name, row in rows.items()
                                          if math.isfinite(row["high_later"]))),
        config=f"rung 1's bandit (rare-correct preset), {seeds} seeds × {steps} updates, symmetric and clip-higher",
        source="computed now (toy_rl.bandit.questions.minibatches.minibatch_experiment)")


def _plan_bandit(smoke: bool, runs: Path, model=None) -> Plan:
    return bandit_comparison_plan(smoke=smoke)


def _plan_arithmetic(smoke: bool, runs: Path, model=None) -> Plan:
    return arithmetic_comparison_plan(runs, smoke=smoke)


def _plan_partial(smoke: bool, runs: Path, model=None) -> Plan:
    return arithmetic_runs_plan(runs, "scratchpad", (), partial=PARTIAL_BUDGET, smoke=smoke)


def _plan_lora(smoke: bool, runs: Path, model=None) -> Plan:
    from .rungs import hard_bapo_configs
    if not smoke and model is None and hard_bapo_configs():
        return Plan()                   # read back from results/ (_hard_comparison)
    c = RUNG3_SMOKE if smoke else RUNG3
    return lora_plan(runs, (max(c["stalenesses"]) if smoke else FOCUS,), c["seeds"], smoke=smoke, model=model)


FIGURES = {s.name: s for s in (
    FigureSpec("00-clipping", "00_clipping", "The clipped surrogate of each rule", _clipping),
    FigureSpec("01-entropy-rule", "01_entropy_clip_rule", "The Entropy-Clip Rule on 10,000 softmaxes", _entropy_rule),
    FigureSpec("02-bandit-rules", "02_off_policy_bandit", "The default bandit comparison, where negatives dominate",
               _bandit_rules, _plan_bandit),
    FigureSpec("03-bapo-balance", "03_bapo_balance", "What ρ counts decides where the bounds go", _bapo_balance),
    FigureSpec("04-arithmetic-rules", "04_arithmetic_transformer", "The default comparison on a small transformer",
               _arithmetic_rules, _plan_arithmetic),
    FigureSpec("05-partial-rollout", "05_partial_rollout", "Three rules under partial rollout", _partial_rollout,
               _plan_partial),
    FigureSpec("06-lora-rules", "06_lora_real_lm", "Three rules on SmolLM2-135M with LoRA", _lora_rules, _plan_lora),
    FigureSpec("07-minibatches", "07_practitioners_questions", "With one epoch, mini-batches are what clip",
               _minibatches),
)}


def select(names=None) -> list[FigureSpec]:
    """The figures named (full name, or its two-digit notebook number, e.g. "04"); all when ``names`` is empty."""
    if not names:
        return list(FIGURES.values())
    by_number = {s.name[:2]: s for s in FIGURES.values()}
    out = []
    for name in names:
        spec = FIGURES.get(name) or by_number.get(name)
        if spec is None:
            raise ValueError(f"unknown figure {name!r}; choose from {', '.join(FIGURES)} (or their numbers 00-07)")
        if spec not in out:
            out.append(spec)
    return out


def caption_line(entry: dict) -> str:
    """One caption: what it shows, the configuration, where the runs came from, machine, time."""
    smoke = "SMOKE VERSION (tiny settings, not a result). " if entry["smoke"] else ""
    return (f"{smoke}{entry['what']}. Config: {entry['config']}. Runs: {entry['source']}. Rendered {entry['date']} "
            f"in {entry['seconds']:.0f} s on {entry['machine']}.")


def regenerate_command(name: str, out=DOCS_FIGURES, smoke: bool = False) -> str:
    """The command that redraws one figure into ``out`` (into docs/figures: with ``--overwrite``)."""
    where = " --overwrite" if Path(out) == DOCS_FIGURES else f" --out {out}"
    return f"toy-rl figures --only {name}{where}" + (" --smoke" if smoke else "")


def is_docs_figures(out) -> bool:
    """Whether ``out`` is the committed figures' folder: docs/figures here, or in the checkout toy_rl runs from."""
    out = Path(out).resolve()
    return out in (DOCS_FIGURES.resolve(), (Path(__file__).resolve().parents[2] / DOCS_FIGURES))


def check_overwrite(specs, out, overwrite: bool) -> None:
    """Refuse to replace the committed figures in docs/figures unless asked (``--overwrite``): ValueError
    naming the flag, before any work."""
    out = Path(out)
    if overwrite or not is_docs_figures(out):
        return
    there = [f"{s.name}.png" for s in specs if (out / f"{s.name}.png").exists()]
    if there:
        raise ValueError(f"{out} holds the committed figures ({', '.join(there)}): pass --overwrite to redraw them "
                         "there, or --out DIR to draw them elsewhere")


def render_figures(names=None, out=DOCS_FIGURES, smoke: bool = False, runs=None, progress: bool = True,
                   model=None, overwrite: bool = False) -> list[dict]:
    """Draw the selected figures into ``out`` (``<name>.png``), update ``captions.json`` and ``README.md``
    there, and return one entry per figure (``skipped`` holds the reason for one that could not be drawn).

    ``runs``: root of the run folders (default ``runs``; smoke: a fresh temporary folder). ``model``: rung 3's
    model (default SmolLM2-135M-Instruct; the tests pass a tiny random one). ``overwrite``: needed to replace
    figures in docs/figures (the committed ones; ValueError otherwise). Before anything trains, one line says
    what will be trained and how long it takes, when that is more than ~30 s (:mod:`toy_rl.timing`)."""
    specs = select(names)
    out = Path(out)
    if smoke and is_docs_figures(out):
        raise ValueError(f"smoke figures never go to {DOCS_FIGURES} (it holds the full ones): pass another --out")
    check_overwrite(specs, out, overwrite)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ValueError(f"--out: cannot create {out}: {err.strerror or err}") from None
    entries = []
    with single_thread(), runs_root(runs, smoke) as root, up_front(
            sum((s.plan(smoke, root, model) for s in specs if s.plan is not None), Plan())):
        for spec in tqdm(specs, desc="figures", unit="figure", disable=not progress):
            t0 = time.perf_counter()
            try:
                fig, parts = spec.build(smoke, root, progress, model)
            except Unavailable as why:
                entries.append(dict(name=spec.name, notebook=spec.notebook, title=spec.title, skipped=str(why)))
                continue
            png = png_bytes(fig)
            (out / f"{spec.name}.png").write_bytes(png)
            entry = dict(name=spec.name, notebook=spec.notebook, title=spec.title, file=f"{spec.name}.png",
                         bytes=len(png), seconds=round(time.perf_counter() - t0, 1), smoke=smoke,
                         machine=describe_machine(), date=utc_now(),
                         command=regenerate_command(spec.name, out, smoke), **parts)
            entry["caption"] = caption_line(entry)
            entries.append(entry)
    _write_index(out, [e for e in entries if "skipped" not in e])
    return entries


def _write_index(out: Path, entries: list[dict]) -> None:
    """Merge ``entries`` into ``captions.json`` (by name, in notebook order) and rewrite ``README.md``."""
    path = out / "captions.json"
    kept = json.loads(path.read_text()) if path.is_file() else {}
    kept.update({e["name"]: e for e in entries})
    kept = {name: kept[name] for name in sorted(kept)}
    path.write_text(json.dumps(kept, indent=1, ensure_ascii=False) + "\n")
    lines = ["# Figures", "",
             "The key plot of each notebook, rendered from its full configuration by `toy-rl figures --overwrite` "
             "(one figure: `toy-rl figures --only 04 --overwrite`; without `--overwrite` the command refuses to "
             "replace these). Long runs are read back from their run folders under `runs/` when finished there; "
             "`captions.json` holds the same captions with every field.", ""]
    for e in kept.values():
        lines += [f"## {e['name'][:2]} · {e['title']} (`notebooks/{e['notebook']}.ipynb`)", "",
                  f"![{e['title']}]({e['file']})", "", e["caption"],
                  "", f"Regenerate: `{e['command']}` ({e['seconds']:.0f} s here, {e['bytes'] // 1000} KB).", ""]
    (out / "README.md").write_text("\n".join(lines))
