"""Rungs 3 and 4's backend for :mod:`toy_rl.experiments`: a pretrained LM, fresh LoRA adapters, the shared loop.

    from toy_rl.experiments import grid, make_spec, run, sweep
    from toy_rl.lm.run import baseline
    base = baseline()                                    # held-out greedy accuracy of the untouched model
    records = run(make_spec("lm", "add", rule="clip-higher"))   # 40 updates: 0.40 -> 0.74 held out, 8.5 min
    results = sweep(grid("lm", "add", stalenesses=(2, 4), seeds=(0,)))   # the three rules, one folder per run

Everything here only wires :func:`toy_rl.lm.load_policy` (model + LoRA + policy) to
:func:`toy_rl.rl.loop.train` (rollout, reward, advantage, staleness, clipped update, metrics, checkpoints).
Each run lives in its own folder (:mod:`toy_rl.experiments.layout`)::

    <out>/<model>-<task>[-smoke]/<scenario>/<rule>/seed<seed>/
        config.json  metrics.jsonl  checkpoint.pt  batches.pt

``batches.pt`` keeps what every update's loss saw (log-probs now and at sampling time, advantages, mask), so
a notebook can re-clip a real batch with other bounds (:func:`load_batch`, :func:`toy_rl.lm.views.bounds_view`).

A spec's ``model`` is a name or path (``"smollm2-135m"``, a local folder or ``.gguf`` file, a cached hub name)
or a zero-argument callable returning a policy (the tests' tiny Llama); its ``preset``
(:mod:`toy_rl.lm.presets`, e.g. "qwen2.5-7b" for rung 4) sets the model, dtype, LoRA, checkpointing and the
batch shape; without one the model is SmolLM2-135M-Instruct in float32 with LoRA r16 on q, k, v, o.

**dtype.** The ``dtype`` option ("auto", "float32", "bfloat16"; default: the preset's, else float32) sets the
base model's compute dtype; "auto" is bfloat16 where the CPU (AVX512 with AMX-BF16 or AVX512-BF16) or GPU has
fast bf16 (:func:`toy_rl.lm.load.resolve_dtype`). The resolved name is written to the run's ``config.json`` as
``"dtype"``; a config without it (runs logged before) is a float32 run (:func:`run_dtype`). In bfloat16 the
adapters, AdamW's state, log-probs, ratios and the loss stay float32, the sampled answers are scored again by
the update's forward (on-policy ratios exactly 1: :class:`toy_rl.lm.policy.HFPolicy`), and every metrics line
has ``logp_gap``, the mean |sampler - scorer| log-prob of the tokens sampled for it.

**Defaults** (:data:`DEFAULTS`) are those measured on SmolLM2-135M-Instruct on a 2-core CPU
(``docs/smollm2.md``): GRPO advantages, lr 3e-4, 8 prompts x 8 answers, at most 5 new tokens for 2-digit
addition, no KL, gradient clip 1.0, 40 updates, held-out evaluation every 10 updates on 100 problems (one
problem = 1 point of accuracy; the binomial noise at 100 problems is ±4.5-5 points, 1 standard error).
Measured: the untouched model scores 0.40; the default run reached 0.64, 0.68, 0.70, 0.74 after 10, 20, 30,
40 updates, in 8.5 minutes on a busy 2-core machine (stale runs of 40 updates took 4.6-4.8 minutes once it
was quieter). Torch runs on one thread by default (:mod:`toy_rl.threads`).
"""
from __future__ import annotations

import json
import math
import time
from pathlib import Path

import torch

from ..experiments.layout import model_label
from ..experiments.spec import RULES
from ..experiments.tasks import make_task, task_label
from ..rl.loop import CHECKPOINT, CONFIG, evaluate, read_config, train as train_loop
from ..rl.run_folder import load_state, lock_run, save_state, write_text
from ..threads import cpu_threads
from .attention import use_grouped, uses_grouped
from .load import SMOLLM2, cpu_bf16_units, resolve_dtype
from .lora import low_precision_products, uses_low_precision_products

# The measured default run (see the module docstring): held-out accuracy of SmolLM2-135M on
# 2-digit addition goes up within a few minutes on 2 CPU cores.
DEFAULTS = dict(steps=40, prompts=8, group_size=8, lr=3e-4, temperature=1.0, advantage="grpo",
                max_grad_norm=1.0, eval_every=10, eval_size=100, checkpoint_every=10)
# Smoke mode: a couple of updates on the real model, a few seconds each.
SMOKE = dict(steps=2, prompts=2, group_size=4, eval_every=2, eval_size=8, checkpoint_every=1)
# The backend's own settings: the compute dtype ("auto", "float32", "bfloat16"; None: the preset's, else
# float32), whether to keep what each update's loss saw in batches.pt, and whether BAPO's search pass holds each
# micro-batch's graph for its backward (HFPolicy.hold_graphs; None: on the CPU, where the memory is there).
OPTIONS = {"dtype": None, "keep_batches": True, "hold_graphs": None}
GSM8K_MAX_NEW_TOKENS = 256
PRESET_RL_FIELDS = ("prompts", "group_size", "max_new_tokens", "micro_batch", "lr", "temperature")
# The model without a preset: float32 (on-policy ratios exactly 1), LoRA r16 / alpha 32 on q, k, v, o.
NO_PRESET = dict(dtype="float32", rank=16, alpha=32, mlp=False, gradient_checkpointing=False, share_prompts=None)


# ------------------------------------------------------------------------------------------ settings

def max_new_tokens_for(task) -> int:
    """The task's own generation budget (arithmetic: space + digits + stop), else 256 (worked answers)."""
    return int(getattr(task, "max_new_tokens", GSM8K_MAX_NEW_TOKENS))


def rl_defaults(task, preset=None) -> dict:
    """RL settings the task and the preset decide: the answer budget (and the temperature, for a task that sets
    one), then the preset's batch shape, lr and temperature."""
    out = {"max_new_tokens": max_new_tokens_for(task)}
    if getattr(task, "temperature", None) is not None:            # a task that is run at its own temperature
        out["temperature"] = task.temperature
    if preset is not None:
        from .presets import get_preset
        p = get_preset(preset)
        out.update({k: getattr(p, k) for k in PRESET_RL_FIELDS})
    return out


def default_model(preset=None):
    """The model of a spec that names none: the preset's, else SmolLM2-135M-Instruct."""
    if preset is None:
        return SMOLLM2
    from .presets import get_preset
    return get_preset(preset).model


def model_settings(spec) -> dict:
    """:func:`make_policy`'s settings for a spec: the preset's dtype, LoRA and memory settings (else
    :data:`NO_PRESET`), the ``dtype`` option over them."""
    kw = dict(NO_PRESET)
    if spec.preset is not None:
        from .lora import ATTENTION, MLP
        from .presets import get_preset
        p = get_preset(spec.preset)
        targets = tuple(p.lora_targets)
        if targets not in (ATTENTION, ATTENTION + MLP) or p.lora_dropout:
            raise ValueError(f"preset {p.name!r}: the runner adapts q, k, v, o (and the MLP) with dropout 0; "
                             f"got targets {list(targets)}, dropout {p.lora_dropout}")
        kw = dict(dtype=p.dtype, rank=p.lora_rank, alpha=p.lora_alpha, mlp=targets == ATTENTION + MLP,
                  gradient_checkpointing=p.gradient_checkpointing, share_prompts=p.share_prompts)
    if spec.option("dtype") is not None:
        kw["dtype"] = spec.option("dtype")
    return kw


def spec_dtype(spec) -> str:
    """The dtype ``spec``'s runs compute in, by name (its "auto" resolved for its device)."""
    return resolve_dtype(model_settings(spec)["dtype"], spec.device)


def resolved_settings(spec) -> dict:
    """:func:`model_settings` with the dtype resolved (:func:`spec_dtype`): what :func:`make_policy` takes."""
    return dict(model_settings(spec), dtype=spec_dtype(spec))


def check_spec(spec) -> None:
    """ValueError for a ``dtype`` option that is not "auto", "float32", "bfloat16" (or float16, fp32, bf16)."""
    dtype = spec.option("dtype")
    if dtype is not None and not (isinstance(dtype, str) and dtype.lower() == "auto"):
        resolve_dtype(dtype)


def run_dtype(config) -> str:
    """The dtype a run computed in, from its config (a dict, or a run folder holding config.json): its
    ``"dtype"``, or "float32" for a config without one (runs logged before the setting existed)."""
    saved = config if isinstance(config, dict) else read_config(config)
    return resolve_dtype((saved or {}).get("dtype") or "float32")


def same_run(saved: dict, spec) -> bool:
    """Whether a logged config computed in the dtype ``spec`` asks for (the runner reads a finished run back only
    then: a bf16 spec never gets an fp32 run's results)."""
    return run_dtype(saved) == spec_dtype(spec)


def make_policy(model=SMOLLM2, task=None, seed: int = 0, dtype="float32", device="auto", rank: int = 16,
                alpha: float = 32, mlp: bool = False, gradient_checkpointing: bool = False,
                share_prompts: bool | None = None, micro_batch: int | None = None):
    """A fresh policy: ``model`` is a name or path (:func:`toy_rl.lm.load_policy`), or a zero-argument
    callable that returns one (the tests build a tiny random Llama this way). The LoRA matrices A are
    drawn after ``torch.manual_seed(seed)``, so a seed fixes the whole run.

    ``gradient_checkpointing`` (rung 4) recomputes each layer in the backward pass
    (:func:`toy_rl.lm.dry_run.enable_gradient_checkpointing`); :class:`HFPolicy` then scores with a
    full forward whatever ``share_prompts`` says (checkpointed layers drop the shared prompt's KV cache).
    ``share_prompts`` None keeps HFPolicy's default. ``dtype`` ("auto", "float32", "bfloat16") applies to a
    callable's policy too (:meth:`HFPolicy.set_dtype`); ``micro_batch`` is the update's, so that a bf16 policy
    rescores its samples in the same chunks (``rescore_rows``)."""
    dtype = resolve_dtype(dtype, device)
    torch.manual_seed(seed)
    if callable(model):
        policy = model()
    else:
        from . import load_policy
        extra = {} if share_prompts is None else {"share_prompts": share_prompts}
        policy = load_policy(model, task, dtype=dtype, device=device, rank=rank, alpha=alpha, mlp=mlp, **extra)
        if gradient_checkpointing:
            from .dry_run import enable_gradient_checkpointing
            enable_gradient_checkpointing(policy.model)
    if hasattr(policy, "set_dtype"):
        policy.set_dtype(dtype).rescore_rows = micro_batch
    return policy


def warm_policy(policy, task, model, progress: bool = False):
    """``policy`` with the task's LoRA warm start (:mod:`toy_rl.lm.warmstart`) when the task asks for one
    (``warm_start`` steps, e.g. the "search-warm" task), else unchanged. Every run of such a task, whatever its
    seed, starts from the same cached adapters."""
    steps = getattr(task, "warm_start", 0)
    if steps:
        from .warmstart import warm_start
        warm_start(policy, task, steps, model=warm_start_label(model, getattr(policy, "dtype", torch.float32)),
                   progress=progress)
    return policy


def warm_start_label(model, dtype) -> str:
    """The model's name in the warm-start cache key: float32 runs keep their own warm start, other dtypes are
    cached apart ("smollm2-135m@bfloat16")."""
    dtype = getattr(torch, dtype) if isinstance(dtype, str) else dtype
    label = model_label(model)
    return label if dtype == torch.float32 else label + "@" + str(dtype).removeprefix("torch.")


def spec_warm_start_label(spec) -> str:
    """:func:`warm_start_label` of the dtype ``spec``'s runs compute in."""
    return warm_start_label(spec.model, spec_dtype(spec))


# ------------------------------------------------------------------------------------------ baseline

def baseline(model=SMOLLM2, task="add", eval_size: int = 100, policy=None, prompt_format: str | None = None,
             threads: int | None = 1, show: int = 3, max_new_tokens: int | None = None, **policy_kwargs) -> dict:
    """Held-out greedy accuracy of the untouched model (LoRA adapters start at zero, so this is
    the pretrained model itself; for a task with a LoRA warm start, the warm-started model every run starts
    from), on the same problems every run evaluates on.

    Returns ``{"accuracy", "eval_size", "seconds", "model", "task", "prompt_format", "examples"}``;
    ``examples`` shows the first ``show`` problems with the model's answer. Pass ``policy`` to
    reuse a loaded one (it must be untouched to count as a baseline). ``max_new_tokens`` defaults to
    the task's budget (the one the runs evaluate with); a longer one shows more of a chatty reply.
    """
    task = make_task("lm", task, prompt_format)
    with cpu_threads(threads):
        t0 = time.perf_counter()
        if policy is None:
            policy = warm_policy(make_policy(model, task, **policy_kwargs), task, model)
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
                model=model_label(model), task=task_label("lm", task), prompt_format=task.prompt_format,
                examples=examples)


# ------------------------------------------------------------------------------------------ one run

def make_warm_start(spec) -> None:
    """Make (or find) the LoRA warm start ``spec``'s runs start from, in this process: what a comparison does once
    before its worker processes start, so that they do not each train it."""
    task = make_task("lm", spec.task)
    if getattr(task, "warm_start", 0):
        settings = resolved_settings(spec)
        with cpu_threads(spec.threads):
            warm_policy(make_policy(spec.model, task, spec.rl.seed, device=spec.device, **settings), task,
                        spec.model, progress=spec.progress)


def train(spec, folder) -> list[dict]:
    """One LoRA RL run of ``spec`` in ``folder`` through :func:`toy_rl.rl.loop.train` (resumes from its
    checkpoint); keeps each update's batch in ``batches.pt`` unless the ``keep_batches`` option is False.
    The resolved dtype goes into config.json; resuming a run of another dtype is a ValueError."""
    task = make_task("lm", spec.task)
    settings = resolved_settings(spec)
    if spec.resume and (Path(folder) / CHECKPOINT).is_file() and run_dtype(folder) != settings["dtype"]:
        raise ValueError(f"{folder} holds a {run_dtype(folder)} run; this spec computes in {settings['dtype']}: "
                         "use another run folder, the same dtype, or resume=False")
    policy = make_policy(spec.model, task, spec.rl.seed, device=spec.device, micro_batch=spec.rl.micro_batch,
                         **settings)
    policy = warm_policy(policy, task, spec.model, progress=spec.progress)
    hold = spec.option("hold_graphs")               # the same numbers either way: not part of the run's identity
    policy.hold_graphs = policy.device.type == "cpu" if hold is None else bool(hold)
    if spec.resume and (Path(folder) / CHECKPOINT).is_file():  # a run resumes in the layout it started in:
        started = read_config(folder) or {}                      # layouts round apart
        policy.pack_answers = policy.pack_answers and "answers" in started
        policy.share_prefix = policy.share_prefix and "prompt_prefix" in started
        if "attention" not in started:
            use_grouped(policy.model, False)
        if "lora_products" not in started:
            low_precision_products(policy.model, False)
    written = {"dtype": settings["dtype"]}
    if policy.share_prefix:
        written["prompt_prefix"] = "once"            # the shared few-shot prefix computed once (toy_rl.lm.prefill)
    if getattr(task, "warm_start", 0):              # which warm start: runs paired by seed must share it
        from .warmstart import fingerprint
        written["warm_start"] = fingerprint(policy.get_weights())
    if policy.device.type == "cpu" and settings["dtype"] != "float32":
        written["cpu_bf16"] = cpu_bf16_units()      # bf16 rounds differently with and without AMX
    if uses_grouped(policy.model):
        written["attention"] = "grouped"            # rounds apart from SDPA's (toy_rl.lm.attention)
    if uses_low_precision_products(policy.model):
        written["lora_products"] = str(policy.dtype).removeprefix("torch.")   # apart from peft's float32 ones
    if getattr(policy, "scores_answers_only", False):
        written["lm_head"] = "answer tokens"        # the head's backward rounds differently from the full head's
        if policy.pack_answers:
            written["answers"] = "packed"           # so do packed answers (toy_rl.lm.packing)
    captured: dict = {}
    keep = spec.option("keep_batches")
    with lock_run(folder):                          # the batches are this run's too: one writer at a time
        records = train_loop(spec.rl, policy, task, folder, resume=spec.resume, progress=spec.progress,
                             on_update=_on_update(Path(folder), written, policy, captured if keep else None))
        _save_batches(Path(folder), captured, spec.rl.agg)
    return records


def _on_update(folder: Path, written: dict, policy, store: dict | None):
    """The ``train(on_update=...)`` hook: ``written`` (the dtype, the warm start's fingerprint for a task with
    one, the CPU's bf16 units for a bf16 run on a CPU) into config.json (once, before the first metrics line), ``logp_gap`` into the record when the
    policy rescored its samples, and, with a ``store``, what each update's loss saw, keyed by step."""
    def hook(record, batch, logp):
        saved = read_config(folder) or {}
        if any(saved.get(k) != v for k, v in written.items()):
            write_text(folder / CONFIG, json.dumps({**saved, **written}, indent=1))
        gap = policy.pop_logp_gap() if hasattr(policy, "pop_logp_gap") else None
        if gap is not None:
            record["logp_gap"] = gap
        if store is not None:
            cpu = lambda t: t.detach().float().cpu().clone()
            store[record["step"]] = dict(logp=cpu(logp), old_logp=cpu(batch.old_logp),
                                         advantages=cpu(batch.advantages), c_low=record["c_low"],
                                         mask=batch.response_mask.detach().cpu().bool(), c_high=record["c_high"])
    return hook


def _read_batches(path: Path) -> dict:
    """``batches.pt`` read with ``weights_only=True`` (:func:`toy_rl.rl.run_folder.load_state`); {} if absent."""
    return load_state(path) if path.is_file() else {}


def _save_batches(out: Path, captured: dict, agg: str) -> None:
    """Merge what this session's updates saw (``{step: batch}``) into ``batches.pt``; a resumed run
    replaces the steps it redid. Written atomically (:func:`toy_rl.rl.run_folder.save_state`)."""
    if not captured:
        return
    path = out / "batches.pt"
    kept = {s: b for s, b in _read_batches(path).items() if s < min(captured)}
    kept.update({step: dict(b, step=step, agg=agg) for step, b in captured.items()})
    save_state(path, kept)


def load_batch(out_dir, step: int | None = None) -> dict:
    """A stored batch of the run in ``out_dir``: the update at ``step`` (default: the one whose ratios
    moved furthest from 1, i.e. the largest mean |log r|; the latest such if tied). Tensors ``logp``,
    ``old_logp``, ``advantages``, ``mask`` and the bounds the rule chose, ``c_low``, ``c_high``; also
    ``step`` and ``agg``."""
    path = Path(out_dir) / "batches.pt"
    if not path.is_file():
        raise FileNotFoundError(f"no stored batches in {out_dir} (run with the keep_batches option on)")
    batches = _read_batches(path)
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
    """The updates whose batches ``batches.pt`` in ``out_dir`` holds."""
    return sorted(_read_batches(Path(out_dir) / "batches.pt"))


def binomial_se(accuracy: float, n: int) -> float:
    """Standard error of an accuracy measured on ``n`` problems: sqrt(p(1-p)/n) (±4.5 points at
    p = 0.3 or 0.7 and n = 100, ±5 at p = 0.5)."""
    return math.sqrt(max(accuracy * (1 - accuracy), 0.0) / max(n, 1))


__all__ = ["DEFAULTS", "GSM8K_MAX_NEW_TOKENS", "NO_PRESET", "OPTIONS", "RULES", "SMOKE", "baseline", "binomial_se",
           "check_spec", "default_model", "load_batch", "make_policy", "max_new_tokens_for", "model_settings",
           "rl_defaults", "run_dtype", "stored_steps", "train"]
