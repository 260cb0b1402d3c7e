"""The RL loop shared by rungs 2–4: rollout → reward → advantage → staleness → clipped update → metrics.

One update (BAPO Algorithm 1, the inner loop, with any of the three rules):

    batch  = source.next(version)            # groups sampled by some earlier policy
    logp   = policy.score(batch)             # current log-probs of the same tokens
    loss   = policy_loss(logp, batch.old_logp, batch.advantages, batch.response_mask, rule)
    step the optimizer; version += 1

The policy is anything with the small interface described in
:mod:`toy_rl.rl.policy`. Metrics go to ``metrics.jsonl`` after every update;
a checkpoint (weights, optimizer, random states, pending rollouts) every
``checkpoint_every`` updates lets an interrupted run resume where it stopped.
"""
from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from tqdm.auto import tqdm

from ..advantages import ADVANTAGES
from ..clipping import FixedBounds, make_rule, policy_loss
from .logbook import Logbook
from .sources import BatchSource


@dataclass
class RLConfig:
    """Everything that defines a run (saved beside its metrics; a resume must match it)."""
    rule: str = "bapo"                 # "symmetric", "clip-higher" or "bapo"
    staleness: int = 0                 # K: reuse a batch for K+1 updates, or sample K updates behind
    mode: str = "reuse"                # "reuse" or "lag"
    partial: int | None = None         # token budget per step (partial rollout); None = off
    steps: int = 100                   # updates
    prompts: int = 8                   # prompts per update
    group_size: int = 8                # answers per prompt (G)
    max_new_tokens: int = 16
    lr: float = 1e-4
    temperature: float = 1.0
    agg: str = "token-mean"
    dual_clip: float | None = None
    advantage: str = "grpo"            # "grpo" or "drgrpo" (no std division)
    max_grad_norm: float = 1.0
    micro_batch: int | None = None     # answers per forward pass (gradient accumulation); None = all
    eval_every: int = 10               # updates between held-out evaluations (0: never)
    eval_size: int = 100
    checkpoint_every: int = 10
    seed: int = 0

    def __post_init__(self):
        if self.steps < 1:
            raise ValueError(f"steps must be >= 1; got {self.steps}")
        if self.lr <= 0:
            raise ValueError(f"lr must be > 0; got {self.lr}")
        if self.prompts < 1 or self.group_size < 2:
            raise ValueError(f"need prompts >= 1 and group_size >= 2 (GRPO compares answers within a group); "
                             f"got prompts={self.prompts}, group_size={self.group_size}")
        if self.staleness < 0:
            raise ValueError(f"staleness must be >= 0 (0 = on-policy); got {self.staleness}")
        if self.partial is not None and self.partial < 1:
            raise ValueError(f"partial (token budget per step) must be >= 1; got {self.partial}")
        make_rule(self.rule)           # unknown rule -> ValueError
        if self.micro_batch is not None and self.micro_batch < 1:
            raise ValueError(f"micro_batch must be >= 1 or None; got {self.micro_batch}")
        if self.advantage not in ADVANTAGES:
            raise ValueError(f"advantage must be one of {ADVANTAGES}; got {self.advantage!r}")


def make_optimizer(policy, lr: float) -> torch.optim.AdamW:
    """AdamW (no weight decay) over the policy's trainable parameters, with torch's fused kernel where it
    has one (CPU and CUDA; also the default of the Hugging Face Trainer that TRL builds on)."""
    params = list(policy.trainable_parameters())
    fused = all(p.device.type in ("cpu", "cuda") and p.dtype.is_floating_point for p in params)
    return torch.optim.AdamW(params, lr=lr, weight_decay=0.0, fused=fused or None)


def evaluate(policy, task, problems, max_new_tokens: int, batch_size: int = 256) -> float:
    """Held-out accuracy: mean reward of greedy answers."""
    total = 0.0
    for i in range(0, len(problems), batch_size):
        chunk = problems[i:i + batch_size]
        outs = policy.sample([policy.encode(p.prompt) for p in chunk], max_new_tokens, 0.0, None)
        total += sum(task.reward(p, policy.decode(toks)) for p, (toks, _, _) in zip(chunk, outs))
    return total / max(len(problems), 1)


def update(policy, optimizer, batch, rule, cfg: RLConfig) -> dict:
    """One clipped policy-gradient update on ``batch`` (the inner loop of BAPO Algorithm 1, lines 4-11):
    score the batch under the current policy, ``policy_loss`` with ``rule`` (BAPO searches its bounds
    here), backward (in ``cfg.micro_batch`` chunks if set), clip the gradient norm, step the optimizer.
    Returns the loss statistics plus ``grad_norm`` and ``entropy`` (mean over answer tokens)."""
    return _update(policy, optimizer, batch, rule, cfg)[0]


def _update(policy, optimizer, batch, rule, cfg):
    """:func:`update`, also returning the detached log-probs the loss saw (before the step)."""
    policy.train()
    optimizer.zero_grad(set_to_none=True)
    if cfg.micro_batch is None or cfg.micro_batch >= batch.input_ids.shape[0]:
        logp, entropy = policy.score(batch.input_ids, batch.attention_mask, batch.start, cfg.temperature)
        mask = batch.response_mask.to(logp.device)
        loss, stats = policy_loss(logp, batch.old_logp.to(logp.device), batch.advantages.to(logp.device), mask,
                                  rule, agg=cfg.agg, dual_clip=cfg.dual_clip)
        loss.backward()
    else:
        stats, entropy, mask, logp = _accumulate(policy, batch, rule, cfg)
    params = [p for p in policy.trainable_parameters() if p.grad is not None]
    grad_norm = torch.nn.utils.clip_grad_norm_(params, cfg.max_grad_norm)
    optimizer.step()
    policy.eval()
    stats["grad_norm"] = float(grad_norm)
    stats["entropy"] = float((entropy.detach() * mask).sum() / mask.sum())
    return stats, logp.detach()


def _accumulate(policy, batch, rule, cfg):
    """Gradient accumulation over micro-batches of ``cfg.micro_batch`` answers (for big models).

    BAPO searches its bounds once per update over the whole batch (Algorithm 1; the authors'
    code searches per micro-batch instead): a no-grad pass scores every answer and picks the
    bounds, then each micro-batch's loss uses them, weighted so the sum equals the full-batch loss.
    """
    B, mb = batch.input_ids.shape[0], cfg.micro_batch
    chunks = [slice(i, i + mb) for i in range(0, B, mb)]
    score = lambda s: policy.score(batch.input_ids[s], batch.attention_mask[s], batch.start, cfg.temperature)
    with torch.no_grad():
        scored = [score(s) for s in chunks]
    logp, entropy = torch.cat([lp for lp, _ in scored]), torch.cat([h for _, h in scored])
    dev = logp.device
    mask, old, adv = batch.response_mask.to(dev), batch.old_logp.to(dev), batch.advantages.to(dev)
    _, stats = policy_loss(logp, old, adv, mask, rule, agg=cfg.agg, dual_clip=cfg.dual_clip)
    fixed = FixedBounds(lo=stats["c_low"], hi=stats["c_high"])
    seqs = (mask.sum(1) > 0).float()
    for s in chunks:
        if not mask[s].any():
            continue
        weight = {"token-mean": mask[s].sum() / mask.sum(), "seq-mean-token-mean": seqs[s].sum() / seqs.sum()
                  }.get(cfg.agg, torch.tensor(mask[s].shape[0] / B))
        loss, _ = policy_loss(score(s)[0], old[s], adv[s], mask[s], fixed, agg=cfg.agg, dual_clip=cfg.dual_clip)
        (loss * weight).backward()
    return stats, entropy, mask, logp


def batch_metrics(batch, version: int) -> dict:
    """What a batch looks like when the policy at ``version`` trains on it: mean reward, groups, token age
    (``staleness_mean``/``_max``: versions between the token's writer and ``version``), the share of answers
    written by more than one policy version (partial rollout), and answer lengths of right and wrong answers."""
    m = batch.response_mask
    age = (version - batch.version).float()
    lengths = m.sum(1)
    correct = batch.rewards > 0.5
    mean_len = lambda sel: float(lengths[sel].mean()) if sel.any() else None
    return {"reward_mean": float(batch.rewards.mean()), "groups": len(batch.groups),
            "staleness_mean": float((age * m).sum() / m.sum()), "staleness_max": float((age * m).max()),
            "mixed_versions": float(sum(len(set(a.version)) > 1 for g in batch.groups for a in g.answers)
                                    / m.shape[0]),
            "len_correct": mean_len(correct), "len_wrong": mean_len(~correct)}


def train(cfg: RLConfig, policy, task, out_dir, resume: bool = True, progress: bool = True,
          heldout=None, on_update=None) -> list[dict]:
    """Run (or resume) RL; returns the metric records. Files in ``out_dir``:
    ``config.json``, ``metrics.jsonl`` (one line per update), ``checkpoint.pt``.

    ``on_update(record, batch, logp)``, if given, is called after every update with the step's
    metric record, the batch it trained on and the log-probs its loss saw (detached, before the step).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(cfg.seed)
    rule = make_rule(cfg.rule)
    source = BatchSource(policy, task, cfg.prompts, cfg.group_size, cfg.max_new_tokens, cfg.staleness,
                         cfg.mode, cfg.partial, cfg.temperature, cfg.advantage, cfg.seed)
    optimizer = make_optimizer(policy, cfg.lr)
    heldout = heldout if heldout is not None else task.heldout(cfg.eval_size)
    ckpt_path, config_path = out / "checkpoint.pt", out / "config.json"

    start = 0
    if resume and ckpt_path.exists():
        start = _load_checkpoint(ckpt_path, config_path, cfg, policy, optimizer, source)
    config_path.write_text(json.dumps(dataclasses.asdict(cfg), indent=1))
    log = Logbook(out / "metrics.jsonl", resume_after=start - 1 if start else None)
    policy.eval()

    bar = tqdm(range(start, cfg.steps), initial=start, total=cfg.steps, disable=not progress, desc=f"RL {cfg.rule}")
    for step in bar:
        t0 = time.perf_counter()
        record = {"step": step, "rule": cfg.rule, "staleness": cfg.staleness}
        if cfg.eval_every and step % cfg.eval_every == 0:
            record["accuracy"] = evaluate(policy, task, heldout, cfg.max_new_tokens)
        batch = source.next(step)
        if batch is not None:
            record.update(batch_metrics(batch, step))
            stats, logp = _update(policy, optimizer, batch, rule, cfg)
            record.update(stats)
            if on_update is not None:
                on_update(record, batch, logp)
        record["seconds"] = time.perf_counter() - t0
        log.write(record)
        bar.set_postfix({k: f"{record[k]:.3f}" for k in ("reward_mean", "entropy", "c_high") if k in record})
        if (step + 1) % cfg.checkpoint_every == 0 or step + 1 == cfg.steps:
            _save_checkpoint(ckpt_path, step + 1, policy, optimizer, source)
    final = {"step": cfg.steps, "rule": cfg.rule, "staleness": cfg.staleness, "final": True,
             "accuracy": evaluate(policy, task, heldout, cfg.max_new_tokens)}
    records = [r for r in log.read() if not r.get("final")]
    log.write(final)
    return records + [final]


def _save_checkpoint(path: Path, step: int, policy, optimizer, source) -> None:
    state = {"step": step, "weights": policy.get_weights(), "optimizer": optimizer.state_dict(),
             "source": source.state_dict(), "torch_rng": torch.get_rng_state()}
    tmp = path.with_suffix(".tmp")
    torch.save(state, tmp)
    tmp.replace(path)                   # never a half-written checkpoint


def _load_checkpoint(path: Path, config_path: Path, cfg, policy, optimizer, source) -> int:
    saved = json.loads(config_path.read_text()) if config_path.exists() else None
    now = dataclasses.asdict(cfg)
    defaults = dataclasses.asdict(RLConfig())          # a field added since the run was saved has its default
    diff = {k: (saved.get(k, defaults[k]), v) for k, v in now.items()
            if k != "steps" and saved.get(k, defaults[k]) != v} if saved else {}
    if diff:                            # a longer run (only `steps` changed) may resume
        raise ValueError(f"{path.parent} holds a run with another config (saved vs now: {diff}); "
                         "use another out_dir or resume=False")
    state = torch.load(path, weights_only=False)
    policy.set_weights(state["weights"])
    optimizer.load_state_dict(state["optimizer"])
    source.load_state_dict(state["source"])
    torch.set_rng_state(state["torch_rng"])
    return state["step"]
