"""A supervised warm start for the LoRA rungs: a few steps of fine-tuning on the task's worked answers, cached.

    from toy_rl.lm.warmstart import warm_start
    losses = warm_start(policy, task, steps=60)     # trains the adapters, or reads them from the cache

Why: RL needs groups with some right answers, and the untouched SmolLM2-135M-Instruct solves too few of
rung 3's long-failure task ("search": 0-2 % right) for group advantages to have anything to push. As at
rung 2 (:mod:`toy_rl.arithmetic.warmstart`), a short supervised phase on the task's own worked answers
(``task.supervised_target``) brings the sampled accuracy into the range where RL can act, and the RL
runs of every rule then start from the same adapters.

Each step draws ``batch`` problems (``random.Random(seed)``, so a seed fixes the data), appends the worked
answer and a newline (the stop token of the plain format) to each prompt, and takes one AdamW step on
the mean negative log-likelihood of the answer tokens. Only the LoRA adapters train. The adapters are
saved under ``<cache>/lm-warmstart/<key>/adapters.pt`` (tensors only, read back with
``weights_only=True``) with the settings in ``meta.json``; the key hashes the model, task, LoRA shape and
warm-start settings, so another setting never reads them.

The same settings do not give the same adapters on every CPU: bf16 matmuls round differently with and without
AMX, and 50 steps of training carry the difference into the model (rung 3's search-hard-warm warm start, retrained
on a second machine, answered 28 % of the held-out problems instead of 34 %). So a comparison that trains across
sessions, on whatever machine each gets, starts from a committed warm start: ``results/warm-starts/<key>/``
(written by ``toy-rl course collect --warm-starts``) is read before the cache, and ``meta.json``'s ``fingerprint``
(:func:`fingerprint`, a hash of the adapters' values) is checked on every read. Each LoRA run writes the
fingerprint it started from into its config.json, and a comparison read back from logs refuses runs that started
from different warm starts (:func:`toy_rl.experiments.logged.check_one_warm_start`).
"""
from __future__ import annotations

import hashlib
import json
import random
import time
from pathlib import Path

import torch

from ..rl.run_folder import load_state, save_state, write_text
from ..timing import announce
from .load import cache_root

LR = 5e-4
BATCH = 16
# Seconds per warm-start step of BATCH sequences on SmolLM2-135M (1 torch thread, the "search" task's 3-shot
# prompts), as meta.json logs it: `toy-rl pilot --rung 3 --task search-warm` on a fresh cache trained its 50 steps
# in 730 s at a load average of ~4 on this project's 2-core CPU (2026-12-02).
SECONDS_PER_STEP = 14.6


def cache_dir() -> Path:
    """``<cache>/lm-warmstart``, one folder per warm start beneath it."""
    return Path(cache_root()).parent / "lm-warmstart"


def committed_dir() -> Path:
    """``results/warm-starts``: warm starts committed with the runs that start from them, read before the cache."""
    from ..experiments.logged import RESULTS, WARM_STARTS
    return RESULTS / WARM_STARTS


def fingerprint(weights: dict) -> str:
    """A short hash of the adapters' names, shapes, dtypes and values: equal exactly when the weights are."""
    h = hashlib.sha256()
    for name in sorted(weights):
        t = weights[name].detach().to("cpu").contiguous().reshape(-1)
        h.update(f"{name}{tuple(weights[name].shape)}{t.dtype}".encode())
        h.update(t.view(torch.uint8).numpy().tobytes())
    return h.hexdigest()[:16]


def estimated_seconds(steps: int, batch: int = BATCH) -> float:
    """The time a warm start of ``steps`` steps of ``batch`` answers takes here (:data:`SECONDS_PER_STEP`)."""
    return steps * SECONDS_PER_STEP * batch / BATCH


def _layout(policy, prompts: list[list[int]], answers: list[list[int]]):
    """Left-padded prompts, right-padded answers: (ids, attention mask, prompt width, answer mask)."""
    P, N = max(map(len, prompts)), max(map(len, answers))
    pad = policy.pad_id
    ids = [[pad] * (P - len(p)) + p + a + [pad] * (N - len(a)) for p, a in zip(prompts, answers)]
    attn = [[0] * (P - len(p)) + [1] * (len(p) + len(a)) + [0] * (N - len(a)) for p, a in zip(prompts, answers)]
    ids, attn = torch.tensor(ids, device=policy.device), torch.tensor(attn, device=policy.device)
    return ids, attn, P, attn[:, P:].float()


def answer_ids(policy, task, problem) -> list[int]:
    """The worked answer's token ids, ending with a newline (what stops an answer in the plain format)."""
    return policy.tokenizer(task.supervised_target(problem) + "\n", add_special_tokens=False).input_ids


def sft(policy, task, steps: int, batch: int = BATCH, lr: float = LR, seed: int = 0, progress: bool = False):
    """``steps`` AdamW steps on the answer tokens' negative log-likelihood; returns the loss of each step."""
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be an integer >= 1; got {steps!r}")
    if not hasattr(task, "supervised_target"):
        raise ValueError(f"task {task!r} has no worked answers (supervised_target) to warm-start on")
    rng = random.Random(seed)
    params = policy.trainable_parameters()
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    was_training = policy.model.training
    policy.model.train()
    losses = []
    bar = range(steps)
    if progress:
        from tqdm.auto import tqdm
        bar = tqdm(bar, desc="LoRA warm start", leave=False)
    try:
        for _ in bar:
            problems = [task.generate(rng) for _ in range(batch)]
            ids, attn, start, mask = _layout(policy, [policy.encode(p.prompt) for p in problems],
                                             [answer_ids(policy, task, p) for p in problems])
            logp, _ = policy.score(ids, attn, start)
            loss = -(logp * mask).sum() / mask.sum()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            losses.append(float(loss.detach()))
    finally:
        policy.model.train(was_training)
    return losses


@torch.no_grad()
def reset_adapters(policy, seed: int = 0) -> None:
    """Fresh adapters drawn from ``seed`` alone, as peft draws them (A Kaiming-uniform, B zero): the warm start
    is then the same whichever run (and RL seed) trains it first."""
    g = torch.Generator().manual_seed(seed)
    fresh = {}
    for name, w in sorted(policy.get_weights().items()):
        if "lora_B" in name:
            fresh[name] = torch.zeros_like(w)
        else:
            fresh[name] = torch.nn.init.kaiming_uniform_(torch.empty_like(w), a=5 ** 0.5, generator=g)
    policy.set_weights(fresh)


def _settings(task, steps, batch, lr, seed, model) -> dict:
    return dict(model=str(model), task=repr(task), steps=steps, batch=batch, lr=lr, seed=seed)


def is_cached(task, steps: int, model: str = "", batch: int = BATCH, lr: float = LR, seed: int = 0) -> bool:
    """Whether a warm start with these settings is in the cache (for any adapter shape): what the up-front
    time estimate (:mod:`toy_rl.lm.backend`) asks before a run that will need one."""
    want = _settings(task, steps, batch, lr, seed, model)
    for meta in [*committed_dir().glob("*/meta.json"), *cache_dir().glob("*/meta.json")]:
        try:
            found = json.loads(meta.read_text())
        except (OSError, ValueError):
            continue
        if all(found.get(k) == v for k, v in want.items()) and (meta.parent / "adapters.pt").is_file():
            return True
    return False


def cache_key(settings) -> str:
    """A short hash of ``settings`` (anything JSON can write)."""
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]


def warm_start(policy, task, steps: int, batch: int = BATCH, lr: float = LR, seed: int = 0, model: str = "",
               progress: bool = False, cache: bool = True) -> list[float]:
    """Warm-start ``policy``'s adapters on ``task`` (:func:`sft` from :func:`reset_adapters`), or load them
    when cached: either way the adapters are replaced, so every run that asks for the same warm start starts
    from the same weights.

    ``model`` names the base model in the cache key (with the adapters' shapes, the task and the
    settings). Returns the losses (those stored with the cached adapters when loaded).
    """
    shapes = {n: list(w.shape) for n, w in policy.get_weights().items()}
    settings = dict(_settings(task, steps, batch, lr, seed, model), adapters=cache_key(shapes))
    folder = cache_dir() / cache_key(settings)
    found = [f for f in (committed_dir() / folder.name, folder) if (f / "adapters.pt").is_file()]
    if cache and found:
        return _read(found[0], policy)
    announce(f"training the rung-3 LoRA warm start ({steps} steps, not cached in {folder.parent})",
             estimated_seconds(steps, batch))
    t0 = time.perf_counter()
    reset_adapters(policy, seed)
    losses = sft(policy, task, steps, batch, lr, seed, progress)
    if cache:
        folder.mkdir(parents=True, exist_ok=True)
        save_state(folder / "adapters.pt", policy.get_weights())
        write_text(folder / "meta.json", json.dumps(dict(settings, losses=losses, fingerprint=fingerprint(
            policy.get_weights()), seconds=round(time.perf_counter() - t0, 1)), indent=1))
    return losses


def _verified(folder: Path) -> tuple[dict, dict]:
    """(meta.json, adapters) of the warm start in ``folder``, the meta with its ``fingerprint`` (added if it had
    none); ValueError if the adapters are not the ones meta.json fingerprinted (a file changed or swapped)."""
    meta = json.loads((folder / "meta.json").read_text())
    weights = load_state(folder / "adapters.pt")
    found = fingerprint(weights)
    if meta.setdefault("fingerprint", found) != found:
        raise ValueError(f"{folder / 'adapters.pt'} is not the warm start its meta.json names: it does not match "
                         f"its meta.json's fingerprint ({found}, expected {meta['fingerprint']}); delete the folder "
                         "to train it again")
    return meta, weights


def _read(folder: Path, policy) -> list[float]:
    """Load the warm start in ``folder`` into ``policy`` (:func:`_verified`); returns its losses."""
    meta, weights = _verified(folder)
    policy.set_weights(weights)
    return meta["losses"]


def commit(dest: Path | None = None) -> list[Path]:
    """Copy every cached warm start into ``dest`` (default :func:`committed_dir`), fingerprinted (a meta.json
    without a fingerprint gets one); returns the folders written. A committed warm start is never replaced by
    another of the same settings (ValueError). What ``toy-rl course collect --warm-starts``
    runs, so that later sessions, on any machine, start from these adapters."""
    dest = committed_dir() if dest is None else Path(dest)
    written = []
    for src in sorted(p.parent for p in cache_dir().glob("*/adapters.pt")):
        meta, weights = _verified(src)
        target = dest / src.name
        if (target / "meta.json").is_file():
            held = json.loads((target / "meta.json").read_text()).get("fingerprint")
            if held != meta["fingerprint"]:
                raise ValueError(f"{target} holds another warm start of the same settings (fingerprint {held}; the "
                                 f"cache's is {meta['fingerprint']}), and committed runs start from it: not replaced")
        target.mkdir(parents=True, exist_ok=True)
        save_state(target / "adapters.pt", weights)
        write_text(target / "meta.json", json.dumps(meta, indent=1))
        written.append(target)
    return written

