"""Rung 3 (and 4) end to end: a pretrained LM, fresh LoRA adapters, the shared RL loop.

    from toy_rl.lm.run import baseline, run_lora, compare_rules
    base = baseline()                               # held-out greedy accuracy of the untouched model
    result = run_lora(rule="clip-higher")           # 40 updates: 0.40 -> 0.74 held out, 8.5 min on 2 busy cores
    summary = compare_rules(stalenesses=(2, 4))     # the three rules, same seeds, one folder per run

Everything here only wires :func:`toy_rl.lm.load_policy` (model + LoRA + policy)
to :func:`toy_rl.rl.loop.train` (rollout, reward, advantage, staleness, clipped
update, metrics, checkpoints). Each run lives in its own folder::

    <out>/<model>-<task>/<mode>/k<staleness>/<rule>/seed<seed>/
        config.json  metrics.jsonl  checkpoint.pt  batches.pt

``batches.pt`` keeps what every update's loss saw (log-probs now and at sampling
time, advantages, mask), so a notebook can re-clip a real batch with other bounds
(:func:`load_batch`, :func:`toy_rl.lm.views.bounds_view`).

**Defaults** (:data:`DEFAULTS`) are those measured on SmolLM2-135M-Instruct on a
2-core CPU (``/work/shared/smollm2_notes.md``): GRPO advantages, lr 3e-4, 8 prompts
x 8 answers, at most 5 new tokens for 2-digit addition, no KL, gradient clip 1.0,
40 updates, held-out evaluation every 10 updates on 100 problems (one problem = 1
point of accuracy; the binomial noise at 100 problems is ±4.5-5 points, 1 standard
error). Measured: the untouched model scores 0.40; the default run reached 0.64,
0.68, 0.70, 0.74 after 10, 20, 30, 40 updates, in 8.5 minutes on a busy 2-core
machine (stale runs of 40 updates took 4.6-4.8 minutes once it was quieter).

Torch runs on **one thread** on the CPU: on a busy 2-core machine two threads made
a rollout 3-15x slower (measured: 2.1 s vs 7.7-36 s for 64 answers) and the update
no faster.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import re
import time
from pathlib import Path

import torch

from ..threads import single_thread
from ..clipping import RULES as RULE_CLASSES
from ..rl.logbook import read_jsonl
from ..rl.loop import RLConfig, evaluate, train
from ..rl.sources import MODES
from .load import SMOLLM2
from .tasks import ArithmeticTask, GSM8KTask

RULES = ("symmetric", "clip-higher", "bapo")

# The measured default run (see the module docstring): held-out accuracy of SmolLM2-135M on
# 2-digit addition goes up within a few minutes on 2 CPU cores.
DEFAULTS = dict(steps=40, prompts=8, group_size=8, lr=3e-4, temperature=1.0, advantage="grpo",
                max_grad_norm=1.0, eval_every=10, eval_size=100, checkpoint_every=10)
# Smoke mode: a couple of updates on the real model, a few seconds each.
SMOKE = dict(steps=2, prompts=2, group_size=4, eval_every=2, eval_size=8, checkpoint_every=1)

# Task names the runner and ``toy-rl lora --task`` know; a path ending in .jsonl is a GSM8K-format file.
TASKS = {
    "add": dict(digits=2, op="+"),             # 2-digit addition: SmolLM2-135M starts at ~0.25
    "add3": dict(digits=3, op="+"),            # 3-digit addition: ~0.15
    "sub": dict(digits=2, op="-"),
    "mul": dict(digits=2, op="*", digits2=1),  # 2-digit x 1-digit: ~0.15
}
GSM8K_MAX_NEW_TOKENS = 256

# Per-update metrics a run summary averages (names as the loop logs them).
UPDATE_METRICS = ("reward_mean", "entropy", "rho", "rho_before", "c_low", "c_high", "clip_frac_low",
                  "clip_frac_high", "grad_norm", "neg_adv_frac", "pos_adv_frac", "neg_mass", "pos_mass",
                  "approx_kl", "staleness_mean", "len_correct", "len_wrong", "search_steps")


# ------------------------------------------------------------------------------------------ pieces

def make_task(task="add", prompt_format: str | None = None):
    """A task object from a name in :data:`TASKS`, a path to a GSM8K-format ``.jsonl`` file, or a task
    object (returned as it is). ``prompt_format`` ("plain" or "chat") overrides the task's default."""
    if not isinstance(task, str):
        if prompt_format is not None and getattr(task, "prompt_format", None) != prompt_format:
            task = dataclasses.replace(task, prompt_format=prompt_format)
        return task
    extra = {} if prompt_format is None else {"prompt_format": prompt_format}
    if task in TASKS:
        return ArithmeticTask(**TASKS[task], **extra)
    if task.endswith(".jsonl"):
        return GSM8KTask(task, **extra)
    raise ValueError(f"unknown task {task!r}; choose from {', '.join(TASKS)} or a path to a GSM8K-format .jsonl file")


def task_label(task) -> str:
    """A short name for folders and tables: 'add', 'mul', 'gsm8k-<file>', ..."""
    for name, fields in TASKS.items():
        if type(task) is ArithmeticTask and all(getattr(task, k) == v for k, v in fields.items()) \
                and task.digits2 == fields.get("digits2") and task.shots == 3:
            return name + ("-chat" if task.prompt_format == "chat" else "")
    if isinstance(task, GSM8KTask):
        return "gsm8k-" + Path(task.path).stem
    return _slug(getattr(task, "name", type(task).__name__))


def max_new_tokens_for(task) -> int:
    """The task's own generation budget (arithmetic: space + digits + stop), else 256 (worked answers)."""
    return int(getattr(task, "max_new_tokens", GSM8K_MAX_NEW_TOKENS))


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", str(text)).strip("-") or "model"


def model_label(model) -> str:
    """'smollm2-135m', the last part of a path or hub name, or a factory's __name__."""
    if callable(model):
        return _slug(getattr(model, "__name__", "custom"))
    return _slug(Path(str(model)).name.removesuffix(".gguf"))


def check_rule(rule: str) -> str:
    if rule not in RULE_CLASSES:
        raise ValueError(f"unknown rule {rule!r}; choose from {', '.join(RULES)}")
    return rule


def check_staleness(staleness) -> int:
    if isinstance(staleness, bool) or not isinstance(staleness, int) or staleness < 0:
        raise ValueError(f"staleness must be an integer >= 0 (0 = on-policy); got {staleness!r}")
    return staleness


def make_config(rule: str = "clip-higher", staleness: int = 0, mode: str = "reuse", partial: int | None = None,
                steps: int | None = None, seed: int = 0, task=None, smoke: bool = False, **overrides) -> RLConfig:
    """The :class:`RLConfig` of one run: :data:`DEFAULTS`, then :data:`SMOKE` if ``smoke`` (``steps`` capped
    at 2), then ``overrides`` (any RLConfig field, e.g. ``lr=1e-4``). ValueError for bad values."""
    check_rule(rule)
    check_staleness(staleness)
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}; got {mode!r}")
    if partial is not None and staleness:
        raise ValueError("partial rollout is its own kind of staleness: use it with staleness 0")
    fields = {f.name for f in dataclasses.fields(RLConfig)}
    unknown = sorted(set(overrides) - fields)
    if unknown:
        raise ValueError(f"unknown RL setting(s) {unknown}; RLConfig has {sorted(fields)}")
    kw = dict(DEFAULTS)
    if steps is not None:
        kw["steps"] = steps
    if smoke:
        kw.update(SMOKE, steps=min(kw["steps"], SMOKE["steps"]))
    if task is not None:
        kw["max_new_tokens"] = max_new_tokens_for(task)
    kw.update(overrides)
    return RLConfig(rule=rule, staleness=staleness, mode=mode, partial=partial, seed=seed, **kw)


def run_dir(root, model, task, rule: str, staleness: int, seed: int, mode: str = "reuse",
            partial: int | None = None, smoke: bool = False) -> Path:
    """``<root>/<model>-<task>[-smoke]/<mode or partialB>/k<staleness>/<rule>/seed<seed>``."""
    regime = f"partial{partial}" if partial is not None else mode
    top = f"{model_label(model)}-{task_label(task)}" + ("-smoke" if smoke else "")
    return Path(root) / top / regime / f"k{staleness}" / rule / f"seed{seed}"


@contextlib.contextmanager
def cpu_threads(threads: int | None):
    """torch on ``threads`` CPU threads inside the block (1: :func:`single_thread`); None leaves it alone."""
    if threads is None:
        yield
    elif threads == 1:
        with single_thread():
            yield
    else:
        if threads < 1:
            raise ValueError(f"threads must be >= 1; got {threads}")
        before = torch.get_num_threads()
        torch.set_num_threads(threads)
        try:
            yield
        finally:
            torch.set_num_threads(before)


def make_policy(model=SMOLLM2, task=None, seed: int = 0, dtype="float32", device="auto", rank: int = 16,
                alpha: float = 32, mlp: bool = False, gradient_checkpointing: bool = False,
                share_prompts: bool | None = None):
    """A fresh policy: ``model`` is a name or path (:func:`toy_rl.lm.load_policy`), or a zero-argument
    callable that returns one (the tests build a tiny random Llama this way). The LoRA matrices A are
    drawn after ``torch.manual_seed(seed)``, so a seed fixes the whole run.

    ``gradient_checkpointing`` (rung 4) recomputes each layer in the backward pass
    (:func:`toy_rl.lm.dry_run.enable_gradient_checkpointing`); :class:`HFPolicy` then scores with a
    full forward whatever ``share_prompts`` says (checkpointed layers drop the shared prompt's KV cache).
    ``share_prompts`` None keeps HFPolicy's default."""
    torch.manual_seed(seed)
    if callable(model):
        return model()
    from . import load_policy
    extra = {} if share_prompts is None else {"share_prompts": share_prompts}
    policy = load_policy(model, task, dtype=dtype, device=device, rank=rank, alpha=alpha, mlp=mlp, **extra)
    if gradient_checkpointing:
        from .dry_run import enable_gradient_checkpointing
        enable_gradient_checkpointing(policy.model)
    return policy


def preset_kwargs(preset) -> dict:
    """:func:`run_lora` keyword arguments from a preset of :mod:`toy_rl.lm.presets` ("smollm2-135m",
    "qwen2.5-7b" or a ``Preset``): model, dtype, LoRA, checkpointing, batch shape, lr, temperature.

        run_lora(**preset_kwargs("qwen2.5-7b"), model="/models/Qwen2.5-7B-Instruct", task="gsm8k.jsonl")
    """
    from .lora import ATTENTION, MLP
    from .presets import get_preset
    p = get_preset(preset)
    targets = tuple(p.lora_targets)
    if targets not in (ATTENTION, ATTENTION + MLP) or p.lora_dropout:
        raise ValueError(f"preset {p.name!r}: run_lora adapts q, k, v, o (and the MLP with mlp=True) with dropout 0; "
                         f"got targets {list(targets)}, dropout {p.lora_dropout}")
    return dict(model=p.model, dtype=p.dtype, rank=p.lora_rank, alpha=p.lora_alpha, mlp=targets == ATTENTION + MLP,
                gradient_checkpointing=p.gradient_checkpointing, share_prompts=p.share_prompts, prompts=p.prompts,
                group_size=p.group_size, max_new_tokens=p.max_new_tokens, micro_batch=p.micro_batch, lr=p.lr,
                temperature=p.temperature)


# ------------------------------------------------------------------------------------------ baseline

def baseline(model=SMOLLM2, task="add", eval_size: int = 100, policy=None, prompt_format: str | None = None,
             threads: int | None = 1, show: int = 3, max_new_tokens: int | None = None, **policy_kwargs) -> dict:
    """Held-out greedy accuracy of the untouched model (LoRA adapters start at zero, so this is
    the pretrained model itself), on the same problems every run evaluates on.

    Returns ``{"accuracy", "eval_size", "seconds", "model", "task", "prompt_format", "examples"}``;
    ``examples`` shows the first ``show`` problems with the model's answer. Pass ``policy`` to
    reuse a loaded one (it must be untouched to count as a baseline). ``max_new_tokens`` defaults to
    the task's budget (the one the runs evaluate with); a longer one shows more of a chatty reply.
    """
    task = make_task(task, prompt_format)
    with cpu_threads(threads):
        t0 = time.perf_counter()
        if policy is None:
            policy = make_policy(model, task, **policy_kwargs)
        if getattr(policy, "prompt_format", task.prompt_format) != task.prompt_format:
            raise ValueError(f"the policy reads {policy.prompt_format!r} prompts but the task writes "
                             f"{task.prompt_format!r} ones")
        problems = task.heldout(eval_size)
        n_new = max_new_tokens or max_new_tokens_for(task)
        t1 = time.perf_counter()
        acc = evaluate(policy, task, problems, n_new)
        seconds = time.perf_counter() - t1
        examples = []
        if show:
            outs = policy.sample([policy.encode(p.prompt) for p in problems[:show]], n_new, 0.0, None)
            for p, (toks, _, _) in zip(problems, outs):
                text = policy.decode(toks)
                examples.append(dict(question=p.prompt.rsplit("\n", 1)[-1], answer=p.answer, reply=text,
                                     reward=task.reward(p, text)))
    return dict(accuracy=acc, eval_size=len(problems), seconds=seconds, load_seconds=t1 - t0,
                model=model_label(model), task=task_label(task), prompt_format=task.prompt_format,
                examples=examples)


# ------------------------------------------------------------------------------------------ one run

def _finished(out: Path, cfg: RLConfig) -> list[dict] | None:
    """The records of a run already finished in ``out`` with this config, else None."""
    metrics, config = out / "metrics.jsonl", out / "config.json"
    if not (metrics.is_file() and config.is_file()):
        return None
    try:
        saved = json.loads(config.read_text())
        records = read_jsonl(metrics)
    except (OSError, ValueError):
        return None
    defaults = dataclasses.asdict(RLConfig())       # a field added since the run was logged has its default
    if any(saved.get(k, defaults[k]) != v for k, v in dataclasses.asdict(cfg).items()):
        return None
    final = [r for r in records if r.get("final")]
    return records if final and final[-1]["step"] == cfg.steps else None


def _save_batches(out: Path, captured: dict, agg: str) -> None:
    """Merge what this session's updates saw (``{step: batch}``) into ``batches.pt``; a resumed run
    replaces the steps it redid."""
    if not captured:
        return
    path = out / "batches.pt"
    kept = torch.load(path, weights_only=False) if path.is_file() else {}
    kept = {s: b for s, b in kept.items() if s < min(captured)}
    kept.update({step: dict(b, step=step, agg=agg) for step, b in captured.items()})
    tmp = path.with_suffix(".tmp")
    torch.save(kept, tmp)
    tmp.replace(path)


def _keep_batch(store: dict):
    """A ``train(on_update=...)`` hook keeping what each update's loss saw, keyed by step."""
    def keep(record, batch, logp):
        cpu = lambda t: t.detach().float().cpu().clone()
        store[record["step"]] = dict(logp=cpu(logp), old_logp=cpu(batch.old_logp), advantages=cpu(batch.advantages),
                                     mask=batch.response_mask.detach().cpu().bool(), c_low=record["c_low"],
                                     c_high=record["c_high"])
    return keep


def run_lora(model=SMOLLM2, task="add", rule: str = "clip-higher", staleness: int = 0, mode: str = "reuse",
             partial: int | None = None, steps: int | None = None, seed: int = 0, out_dir=None, smoke: bool = False,
             resume: bool = True, progress: bool = True, threads: int | None = 1, dtype="float32", device="auto",
             rank: int = 16, alpha: float = 32, mlp: bool = False, gradient_checkpointing: bool = False,
             share_prompts: bool | None = None, keep_batches: bool = True, **overrides) -> dict:
    """One LoRA RL run through :func:`toy_rl.rl.loop.train`; returns :func:`summarize` of its records.

    model: ``"smollm2-135m"``, a local folder / ``.gguf`` file / cached hub name (rung 4: e.g. a local
        Qwen2.5-7B-Instruct with ``dtype="bfloat16"``), or a zero-argument callable returning a policy.
    task: a name in :data:`TASKS` (default "add": 2-digit addition, 3-shot plain prompt), a GSM8K-format
        ``.jsonl`` path, or a task object.
    rule, staleness, mode, partial: the clipping rule and the off-policy regime (:mod:`toy_rl.rl.sources`).
    steps, seed, ``**overrides``: :data:`DEFAULTS` and any other :class:`RLConfig` field (``lr=1e-4``, ...).
    out_dir: the run's folder (default :func:`run_dir` under ``runs/lora``). A finished run there with
        the same config is not run again (its records are read); an interrupted one resumes from its
        last checkpoint (``resume=False`` starts over).
    smoke: a couple of updates with small batches (:data:`SMOKE`), for tests and notebooks in a hurry.
    threads: torch CPU threads during the run (default 1, see the module docstring; None: torch's choice).
    dtype, device, rank, alpha, mlp, gradient_checkpointing, share_prompts: the model and its adapters
        (:func:`make_policy`); :func:`preset_kwargs` fills them (and the batch shape) from a preset.
    keep_batches: save what each update's loss saw to ``batches.pt`` (see :func:`load_batch`).
    """
    task = make_task(task)
    cfg = make_config(rule, staleness, mode, partial, steps, seed, task=task, smoke=smoke, **overrides)
    out = Path(out_dir) if out_dir is not None else run_dir("runs/lora", model, task, rule, staleness, seed, mode,
                                                            partial, smoke)
    done = _finished(out, cfg) if resume else None
    if done is not None:
        return summarize(done, out_dir=out, resumed="finished")
    started = (out / "checkpoint.pt").is_file() and resume
    captured: dict = {}
    with cpu_threads(threads):
        t0 = time.perf_counter()
        policy = make_policy(model, task, seed, dtype=dtype, device=device, rank=rank, alpha=alpha, mlp=mlp,
                             gradient_checkpointing=gradient_checkpointing, share_prompts=share_prompts)
        load_seconds = time.perf_counter() - t0
        records = train(cfg, policy, task, out, resume=resume, progress=progress,
                        on_update=_keep_batch(captured) if keep_batches else None)
        _save_batches(out, captured, cfg.agg)
    return summarize(records, out_dir=out, resumed="resumed" if started else "new", load_seconds=load_seconds,
                     wall_seconds=time.perf_counter() - t0)


# ------------------------------------------------------------------------------------------ summaries

def _mean(values):
    vals = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    return sum(vals) / len(vals) if vals else None


def summarize(records: list[dict], **extra) -> dict:
    """One run in a few numbers and curves, from its metric records (``train``'s return or metrics.jsonl).

    Numbers: ``baseline`` (accuracy at step 0: the untouched model), ``final_accuracy`` (after the last
    update), ``best_accuracy``, ``seconds`` (sum of the update times; evaluations included), and the mean
    over updates of each of :data:`UPDATE_METRICS` plus ``grad_norm_max``, ``entropy_first`` and
    ``entropy_last`` (mean over the first / last 5 updates). Curves (lists of [step, value]):
    ``accuracy_curve`` and ``curves[name]`` for every update metric.
    """
    steps = [r for r in records if not r.get("final")]
    final = [r for r in records if r.get("final")]
    updates = [r for r in steps if "c_low" in r]
    acc = [[r["step"], r["accuracy"]] for r in steps if r.get("accuracy") is not None]
    if final and final[-1].get("accuracy") is not None:
        acc.append([final[-1]["step"], final[-1]["accuracy"]])
    first = records[0] if records else {}
    out = dict(rule=first.get("rule"), staleness=first.get("staleness"), steps=len(steps),
               updates=len(updates), finished=bool(final),
               baseline=acc[0][1] if acc and acc[0][0] == 0 else None,
               final_accuracy=final[-1].get("accuracy") if final else None,
               best_accuracy=max((a for _, a in acc), default=None),
               accuracy_curve=acc, seconds=sum(r.get("seconds", 0.0) for r in steps))
    for name in UPDATE_METRICS:
        out[name] = _mean(r.get(name) for r in updates)
    norms = [r["grad_norm"] for r in updates if r.get("grad_norm") is not None]
    out["grad_norm_max"] = max(norms, default=None)
    ent = [r["entropy"] for r in updates if r.get("entropy") is not None]
    out["entropy_first"], out["entropy_last"] = _mean(ent[:5]), _mean(ent[-5:])
    out["curves"] = {name: [[r["step"], r[name]] for r in updates if r.get(name) is not None]
                     for name in UPDATE_METRICS}
    out.update({k: (str(v) if isinstance(v, Path) else v) for k, v in extra.items()})
    return out


def load_run(out_dir) -> dict:
    """:func:`summarize` of the run logged in ``out_dir`` (finished or not), with its config."""
    out = Path(out_dir)
    if not (out / "metrics.jsonl").is_file():
        raise FileNotFoundError(f"no run in {out} (no metrics.jsonl)")
    s = summarize(read_jsonl(out / "metrics.jsonl"), out_dir=out)
    if (out / "config.json").is_file():
        s["config"] = json.loads((out / "config.json").read_text())
    return s


def load_batch(out_dir, step: int | None = None) -> dict:
    """A stored batch of the run in ``out_dir``: the update at ``step`` (default: the one whose ratios
    moved furthest from 1, i.e. the largest mean |log r|; the latest such if tied). Tensors ``logp``,
    ``old_logp``, ``advantages``, ``mask`` and the bounds the rule chose, ``c_low``, ``c_high``; also
    ``step`` and ``agg``."""
    path = Path(out_dir) / "batches.pt"
    if not path.is_file():
        raise FileNotFoundError(f"no stored batches in {out_dir} (run with keep_batches=True)")
    batches = torch.load(path, weights_only=False)
    if not batches:
        raise ValueError(f"{path} holds no batch")
    if step is None:
        drift = {s: float(((b["logp"] - b["old_logp"]).abs() * b["mask"]).sum() / b["mask"].sum().clamp(min=1))
                 for s, b in batches.items()}
        step = max(batches, key=lambda s: (round(drift[s], 6), s))
    if step not in batches:
        raise ValueError(f"no stored batch for step {step}; steps stored: {sorted(batches)}")
    return batches[step]


def stored_steps(out_dir) -> list[int]:
    path = Path(out_dir) / "batches.pt"
    return sorted(torch.load(path, weights_only=False)) if path.is_file() else []


# ------------------------------------------------------------------------------------------ comparison

TABLE_KEYS = ("baseline", "final_accuracy", "best_accuracy", "entropy_first", "entropy_last", "rho", "c_low", "c_high",
              "clip_frac_low", "clip_frac_high", "grad_norm", "grad_norm_max", "reward_mean", "seconds")


def compare_rules(rules=RULES, stalenesses=(2, 4), seeds=(0,), model=SMOLLM2, task="add", mode: str = "reuse",
                  partial: int | None = None, steps: int | None = None, out_dir="runs/lora", smoke: bool = False,
                  progress: bool = True, on_run=None, **run_kwargs) -> dict:
    """Every rule at every staleness, with the same seeds; each run in its own :func:`run_dir` under
    ``out_dir``. Rerunning skips finished runs and resumes interrupted ones, so an interrupted
    comparison is finished by calling it again.

    Returns ``{"runs": [...], "table": [...], "out_dir": ...}``: ``runs`` holds one :func:`summarize`
    per (staleness, rule, seed) with ``seed`` and ``out_dir``; ``table`` one row per (staleness, rule)
    with the mean over seeds of :data:`TABLE_KEYS` (and ``seeds``). ``on_run(summary)`` is called
    after each run (e.g. to print it). ``run_kwargs`` go to :func:`run_lora`.
    """
    rules = [check_rule(r) for r in rules]
    stalenesses = [check_staleness(k) for k in stalenesses]
    seeds = list(seeds)
    if not rules or not stalenesses or not seeds:
        raise ValueError("need at least one rule, one staleness and one seed")
    if partial is not None and any(stalenesses):
        raise ValueError("partial rollout is its own kind of staleness: use it with staleness 0")
    task_obj = make_task(task)
    runs = []
    for k in stalenesses:
        for rule in rules:
            for seed in seeds:
                where = run_dir(out_dir, model, task_obj, rule, k, seed, mode, partial, smoke)
                s = run_lora(model, task_obj, rule, k, mode, partial, steps, seed, where, smoke=smoke,
                             progress=progress, **run_kwargs)
                s["seed"] = seed
                runs.append(s)
                if on_run is not None:
                    on_run(s)
    return dict(runs=runs, table=table_rows(runs), out_dir=str(out_dir))


def table_rows(runs: list[dict]) -> list[dict]:
    """One row per (staleness, rule) in first-seen order: means over seeds of :data:`TABLE_KEYS`."""
    groups: dict = {}
    for s in runs:
        groups.setdefault((s["staleness"], s["rule"]), []).append(s)
    rows = []
    for (k, rule), ss in groups.items():
        row = dict(staleness=k, rule=rule, seeds=len(ss))
        row.update({key: _mean(s.get(key) for s in ss) for key in TABLE_KEYS})
        rows.append(row)
    return rows


def format_table(rows: list[dict], keys=("baseline", "final_accuracy", "best_accuracy", "entropy_first",
                                         "entropy_last", "rho", "c_low", "c_high", "clip_frac_low",
                                         "clip_frac_high", "grad_norm", "seconds")) -> str:
    """A plain-text table of :func:`table_rows` (None shows as '-')."""
    short = {"final_accuracy": "final_acc", "best_accuracy": "best_acc", "entropy_first": "H_first",
             "entropy_last": "H_last", "clip_frac_low": "clip_lo", "clip_frac_high": "clip_hi",
             "grad_norm": "|g|", "seconds": "sec"}
    head = f"{'k':>3} {'rule':<12}" + "".join(f"{short.get(k, k):>10}" for k in keys)
    lines = [head]
    for r in rows:
        cells = "".join(f"{'-':>10}" if r.get(k) is None else
                        f"{r[k]:>10.0f}" if k == "seconds" else f"{r[k]:>10.3f}" for k in keys)
        lines.append(f"{r['staleness']:>3} {r['rule']:<12}" + cells)
    return "\n".join(lines)


def binomial_se(accuracy: float, n: int) -> float:
    """Standard error of an accuracy measured on ``n`` problems: sqrt(p(1-p)/n) (±4.5 points at
    p = 0.3 or 0.7 and n = 100, ±5 at p = 0.5)."""
    return math.sqrt(max(accuracy * (1 - accuracy), 0.0) / max(n, 1))
