"""Supervised warm start: teach a fresh GPT a task by teacher forcing, stopping at moderate accuracy.

RL needs a policy that is right sometimes -- something to improve and
something to lose. So training stops as soon as the *sampled* (temperature 1)
accuracy on a fixed validation sample reaches ``target_accuracy`` (or after
``max_steps``); the held-out set is only measured at the end.

Each step draws fresh problems (``task.sample``, never held-out ones), builds
BOS + prompt + supervised_target + EOS, and minimises cross-entropy on the
answer tokens only (target and EOS; prompt tokens are inputs, not labels).

Checkpoints are cached: ``ensure_warmstart(task)`` returns
``$TOY_RL_CACHE/warmstart/<task>-<hash>.pt`` (default ``~/.cache/toy_rl``),
training it first if it is missing. The hash covers the task's settings and
the whole ``WarmstartConfig``, so a different config never reuses a stale file.
Metrics go to the ``.jsonl`` beside it, one JSON object per line. How long a fresh one takes is measured
(``RATES``, :func:`estimated_seconds`) and said first when it is long (:func:`announce_training`, :mod:`toy_rl.timing`).

Training runs on ``config.threads`` CPU threads whatever the caller set: torch's sums split differently on 1
and 2 threads, and over 2,000 steps the two give different models (``add``: held-out greedy 0.44 on one thread,
0.69 on two). Pinned, a warm start is the same model on every run of one torch build and CPU; the defaults are
the thread counts that trained the runs committed in ``results/`` (their first held-out accuracy, e.g. 0.42 on
the notebook's ``add`` runs and 0.222 on ``long-failures``, is what a fresh cache reproduces).
"""
from __future__ import annotations

import hashlib
import json
import os
import random
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from .. import timing
from ..threads import cpu_threads
from ..timing import Rate
from .model import GPT, ModelConfig, load_checkpoint, resolve_device, save_checkpoint
from .model.evaluate import evaluate
from .model.tokenizer import BOS_ID, EOS_ID, PAD_ID, encode
from .tasks import Task, get_task

CACHE_VERSION = 1     # bump when training changes in a way the config does not show


@dataclass(frozen=True)
class WarmstartConfig:
    model: ModelConfig = field(default_factory=ModelConfig)
    max_steps: int = 3000
    batch_size: int = 64
    lr: float = 3e-3                  # high for a transformer, fine for this tiny one (not for RL!)
    beta2: float = 0.99               # nanoGPT's choice for small models: faster to adapt
    warmup_steps: int = 100
    weight_decay: float = 0.01
    target_accuracy: float = 0.5      # stop when sampled validation accuracy reaches this (> 1: never)
    eval_every: int = 100
    eval_problems: int = 200          # validation sample (training distribution, fixed seed)
    heldout_problems: int = 500       # measured once at the end, greedy and sampled
    seed: int = 0
    threads: int = 1                  # CPU threads to train on (the model depends on it; see the module docstring)


# Per task: how long to train at most, where to stop, and on how many threads. Measured with the default model
# (211,520 parameters) on this 2-core CPU, torch 2.13: add on 1 thread runs all 2000 steps (~60 s, held-out 44%
# greedy / 33% sampled; on 2 threads it stops at 1600 steps with 69% / 57%), scratchpad on 1 thread stops at 800
# (69% greedy). search always runs 600 steps (target > 1: never stops early), short on purpose so that RL starts
# near 20% sampled accuracy (presets.py, "long-failures"): on 2 threads, the count its committed runs were
# trained from, held-out 23% greedy (0.222 on the 1,000 problems the runs evaluate); ~130 s on a busy machine.
TASK_DEFAULTS = {
    "add": {"max_steps": 2000, "target_accuracy": 0.5},
    "countdown": {"max_steps": 2000, "target_accuracy": 0.4},
    "scratchpad": {"max_steps": 1500, "target_accuracy": 0.5},
    "search": {"max_steps": 600, "target_accuracy": 2.0, "eval_every": 600, "threads": 2},
}


def default_config(task) -> WarmstartConfig:
    """The notebooks' warm-start settings for ``task`` (a name or a Task)."""
    name = get_task(task).name
    return WarmstartConfig(**TASK_DEFAULTS.get(name, {}))


def smoke_config(task) -> WarmstartConfig:
    """A tiny warm start (1 layer, d_model 32) that trains in seconds, for smoke runs: the notebooks'
    ``SMOKE`` mode, ``--smoke`` figures and reports. The context fits the task's longest example."""
    block = 64 if get_task(task).name == "scratchpad" else 32
    return WarmstartConfig(model=ModelConfig(n_layer=1, n_head=2, d_model=32, block_size=block), max_steps=30,
                           batch_size=16, warmup_steps=5, eval_every=10, eval_problems=16, heldout_problems=16)


def config_hash(task: Task, config: WarmstartConfig) -> str:
    key = {"task": task.name, "params": task.params(), "config": asdict(config), "version": CACHE_VERSION}
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:10]


def cache_dir(root=None) -> Path:
    """Where warm starts live: ``root``, else $TOY_RL_CACHE, else ~/.cache/toy_rl; plus /warmstart."""
    root = root or os.environ.get("TOY_RL_CACHE") or Path.home() / ".cache" / "toy_rl"
    return Path(root).expanduser() / "warmstart"


def cache_path(task, config: WarmstartConfig | None = None, root=None) -> Path:
    task = get_task(task)
    config = config or default_config(task)
    return cache_dir(root) / f"{task.name}-{config_hash(task, config)}.pt"


# --- how long it takes -----------------------------------------------------------------------------------------

# Seconds per warm-start step of each task's default config (64 sequences, the default 211,520-parameter GPT, the
# validation sample every eval_every steps included) and of the held-out evaluation at the end (500 problems), as
# ensure_warmstart logs them (the "seconds" of <cache>/warmstart/<task>-<hash>.jsonl) when it trains on a fresh
# cache, what `TOY_RL_CACHE=$(mktemp -d) toy-rl warmstart --task <task>` does; 1 thread, 2026-12-01.
RATES = {
    "add": Rate(0.0425, 64, "toy-rl warmstart --task add on a fresh cache: 2000 steps in 85 s (its target not "
                            "reached), load 1.3-2.1"),
    "countdown": Rate(0.0754, 64, "toy-rl warmstart --task countdown on a fresh cache: 2000 steps in 151 s, load 2.1"),
    "scratchpad": Rate(0.101, 64, "logged by toy-rl figures --only 05 on a fresh cache: 800 steps in 81 s (stopped at "
                                  "its target), load ~1.4"),
    "search": Rate(0.078, 64, "logged by toy-rl arithmetic --compare long-failures on a fresh cache (the preset's warm "
                              "start): 600 steps in 47 s"),
}
HELDOUT_SECONDS = {"add": 1.3, "countdown": 0.9, "scratchpad": 2.5, "search": 3.2}   # 500 problems


def estimated_seconds(task, config: WarmstartConfig | None = None) -> float:
    """Estimated seconds to train a warm start (all ``max_steps``: early stopping only makes it shorter), from
    :data:`RATES` scaled by model size and batch (an unmeasured task: the slowest rate)."""
    task = get_task(task)
    config = config or default_config(task)
    rate = RATES.get(task.name) or max(RATES.values(), key=lambda r: r.seconds)
    size = GPT(config.model).num_params() / GPT(ModelConfig()).num_params()
    scale = size * config.batch_size / rate.batch
    heldout = HELDOUT_SECONDS.get(task.name, max(HELDOUT_SECONDS.values())) * size
    return config.max_steps * rate.seconds * scale + heldout * config.heldout_problems / 500


def announce_training(task, config: WarmstartConfig | None = None, root=None) -> bool:
    """The line :func:`ensure_warmstart` prints before it trains a warm start that is not cached, e.g. "training
    the rung-2 warm start for task add (not cached in ~/.cache/toy_rl/warmstart): up to about 2 min on 2 CPU
    cores" (:func:`toy_rl.timing.announce`)."""
    task = get_task(task)
    config = config or default_config(task)
    return timing.announce(f"training the rung-2 warm start for task {task.name} (not cached in {cache_dir(root)})",
                           estimated_seconds(task, config), up_to=config.target_accuracy <= 1)


def make_batch(task: Task, problems, device=None):
    """Teacher-forcing batch: (input_ids, attention_mask, labels), right-padded; labels are -100 off the answer."""
    rows, starts = [], []
    for p in problems:
        prompt = [BOS_ID] + encode(p.prompt)
        rows.append(prompt + encode(task.supervised_target(p)) + [EOS_ID])
        starts.append(len(prompt))
    width = max(map(len, rows))
    ids = torch.full((len(rows), width), PAD_ID, dtype=torch.long)
    labels = torch.full((len(rows), width), -100, dtype=torch.long)
    for i, (row, s) in enumerate(zip(rows, starts)):
        ids[i, :len(row)] = torch.tensor(row)
        labels[i, s - 1:len(row) - 1] = torch.tensor(row[s:])     # position t predicts token t + 1
    mask = (ids != PAD_ID).long()
    return ids.to(device), mask.to(device), labels.to(device)


def supervised_loss(model, ids, mask, labels) -> torch.Tensor:
    logits = model(ids, mask)
    return F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=-100)


def train_warmstart(task, config: WarmstartConfig | None = None, device="auto", progress: bool = True,
                    metrics_path=None) -> tuple[GPT, dict]:
    """Train a fresh model on ``config.threads`` CPU threads (on a GPU: as it is); returns (model in eval mode,
    summary dict). Metrics as JSON lines if a path is given."""
    task = get_task(task)
    config = config or default_config(task)
    device = resolve_device(device)
    with cpu_threads(config.threads if device.type == "cpu" else None):
        return _train(task, config, device, progress, metrics_path)


def _train(task, config: WarmstartConfig, device, progress: bool, metrics_path) -> tuple[GPT, dict]:
    torch.manual_seed(config.seed)
    rng = random.Random(config.seed)
    model = GPT(config.model).to(device)
    if max(len(p.prompt) for p in task.heldout(50)) + task.max_answer_chars + 2 > config.model.block_size:
        raise ValueError(f"block_size={config.model.block_size} is too short for task {task.name!r}")
    opt = torch.optim.AdamW(model.parameters(), lr=config.lr, betas=(0.9, config.beta2),
                            weight_decay=config.weight_decay)
    validation = task.sample(config.eval_problems, random.Random(f"validation-{config.seed}"))
    log = open(metrics_path, "w") if metrics_path else None

    def emit(row):
        if log:
            log.write(json.dumps(row) + "\n")
            log.flush()

    start, step, val_acc = time.time(), 0, 0.0
    bar = tqdm(range(1, config.max_steps + 1), desc=f"warm start {task.name}", disable=not progress)
    try:
        for step in bar:
            lr = config.lr * min(1.0, step / max(1, config.warmup_steps))
            for g in opt.param_groups:
                g["lr"] = lr
            model.train()
            loss = supervised_loss(model, *make_batch(task, task.sample(config.batch_size, rng), device))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            grad_norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0))
            opt.step()
            emit({"step": step, "loss": loss.item(), "lr": lr, "grad_norm": grad_norm,
                  "seconds": round(time.time() - start, 3)})
            if step % config.eval_every == 0 or step == config.max_steps:
                val_acc = evaluate(model, task, validation, greedy=False, seed=config.seed)
                emit({"step": step, "val_acc_sampled": val_acc, "seconds": round(time.time() - start, 3)})
                bar.set_postfix(loss=f"{loss.item():.3f}", val_acc=f"{val_acc:.2f}")
                if val_acc >= config.target_accuracy:
                    break
        model.eval()
        heldout = task.heldout(config.heldout_problems)
        summary = {"task": task.name, "task_params": task.params(), "steps": step,
                   "seconds": round(time.time() - start, 1), "params": model.num_params(),
                   "val_acc_sampled": val_acc,
                   "heldout_acc_greedy": evaluate(model, task, heldout, greedy=True),
                   "heldout_acc_sampled": evaluate(model, task, heldout, greedy=False, seed=config.seed),
                   "heldout_problems": len(heldout), "threads": torch.get_num_threads()}
        emit({"summary": summary})
    finally:
        bar.close()
        if log:
            log.close()
    return model, summary


def ensure_warmstart(task, config: WarmstartConfig | None = None, *, root=None, force: bool = False,
                     device="auto", progress: bool = True) -> Path:
    """Path of the cached warm-start checkpoint for (task, config); trains and saves it first if missing.

    ``config`` defaults to ``default_config(task)``; ``root`` overrides the cache location.
    """
    task = get_task(task)
    config = config or default_config(task)
    path = cache_path(task, config, root)
    if path.exists() and not force:
        return path
    announce_training(task, config, root)             # one line before a long training (not when a caller did)
    path.parent.mkdir(parents=True, exist_ok=True)
    model, summary = train_warmstart(task, config, device=device, progress=progress,
                                     metrics_path=path.with_suffix(".jsonl"))
    save_checkpoint(model, path, meta={**summary, "warmstart_config": asdict(config)})
    return path


def load_warmstart(task, config: WarmstartConfig | None = None, device="auto", **kwargs) -> GPT:
    """The warm-started model for (task, config), trained first if not cached; ``model.meta`` has its summary."""
    return load_checkpoint(ensure_warmstart(task, config, device=device, **kwargs), device=device)
