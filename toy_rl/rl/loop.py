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
The run folder is locked while a run writes to it, every file a resume reads is
written atomically, and a resume checks the config, the checkpoint and the metrics
before it changes anything (:mod:`toy_rl.rl.run_folder`, :func:`check_same_run`).
:class:`~toy_rl.rl.config.RLConfig` lives in :mod:`toy_rl.rl.config` (imported here too).
"""
from __future__ import annotations

import json
import time
from contextlib import nullcontext
from pathlib import Path

import torch
from tqdm.auto import tqdm

from ..clipping import BAPO, FixedBounds, policy_loss, token_ratio
from ..clipping.rules import has_fixed_bounds
from .config import RLConfig, config_differences, rule_label
from .diagnostics import balance_at_start
from .logbook import Logbook
from .run_folder import load_state, lock_run, save_state, write_text
from .rollout import legacy_classes
from .sources import BatchSource

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
    Returns the loss statistics plus ``grad_norm``, ``entropy`` (mean over answer tokens) and, whatever
    the rule, :func:`~toy_rl.rl.diagnostics.balance_at_start` of the batch (λ and ρ at BAPO's start bounds:
    the regime the update is in)."""
    return _update(policy, optimizer, batch, rule, cfg)[0]


def _update(policy, optimizer, batch, rule, cfg):
    """:func:`update`, also returning the detached log-probs the loss saw (before the step) and the batch as the loss
    saw it: a batch with ``old_logp_from_update`` (on-policy; its sampler did not score it a second time) gets this
    update's own log-probs, detached, as its old log-probs (:func:`_own_old_logp`): ratios of exactly 1."""
    policy.train()
    optimizer.zero_grad(set_to_none=True)
    if cfg.micro_batch is None or cfg.micro_batch >= batch.input_ids.shape[0]:
        logp, entropy = policy.score(batch.input_ids, batch.attention_mask, batch.start, cfg.temperature)
        batch = _own_old_logp(policy, batch, logp) if batch.old_logp_from_update else batch
        mask = batch.response_mask.to(logp.device)
        loss, stats = policy_loss(logp, batch.old_logp.to(logp.device), batch.advantages.to(logp.device), mask,
                                  rule, agg=cfg.agg, dual_clip=cfg.dual_clip)
        loss.backward()
    else:
        stats, entropy, mask, logp, batch = _accumulate(policy, batch, rule, cfg)
    params = [p for p in policy.trainable_parameters() if p.grad is not None]
    grad_norm = torch.nn.utils.clip_grad_norm_(params, cfg.max_grad_norm)
    optimizer.step()
    policy.eval()
    stats["grad_norm"] = float(grad_norm)
    stats["entropy"] = float((entropy.detach() * mask).sum() / mask.sum())
    logp = logp.detach()
    stats.update(balance_at_start(token_ratio(logp, batch.old_logp.to(logp.device)), batch.advantages, mask))
    return stats, logp, batch


def _own_old_logp(policy, batch, logp):
    """``batch`` with ``logp`` (the update's log-probs, detached; 0 at padding) as its old log-probs. The sampler's
    log-probs they replace count toward the policy's sampler-vs-scorer gap, as its rescoring would have counted them."""
    mask = batch.response_mask.bool()
    own = torch.where(mask, logp.detach().to(batch.old_logp.device, torch.float32), 0.0)
    if hasattr(policy, "add_logp_gap"):
        policy.add_logp_gap(batch.old_logp, own, mask)
    return batch._replace(old_logp=own, old_logp_from_update=False)


def needs_search_pass(rule, on_policy: bool) -> bool:
    """Whether an update in micro-batches must score the whole batch before any micro-batch's loss: only where the
    rule's bounds depend on the batch (BAPO) and the ratios are not known in advance. On policy (old log-probs from
    the update's own forward) every ratio is exactly 1, and BAPO's bounds always hold 1 (c_low <= 1 <= c_high,
    Algorithm 1's ranges): no token clips whatever bounds the search picks, so the gradient is the same without
    them, bit for bit."""
    return not (has_fixed_bounds(rule) or (on_policy and isinstance(rule, BAPO)))


def _accumulate(policy, batch, rule, cfg):
    """Gradient accumulation over micro-batches of ``cfg.micro_batch`` answers (for big models).

    BAPO searches its bounds once per update over the whole batch (Algorithm 1; the authors'
    code searches per micro-batch instead): a first pass scores every answer and picks the
    bounds, then each micro-batch's loss uses them, weighted so the sum equals the full-batch loss.
    That first pass is a no-grad forward, or, where the policy's ``hold_graphs`` is on, the micro-batches'
    forwards with grad, each graph held until its backward (one forward per answer; more memory).
    Where :func:`needs_search_pass` says no (fixed bounds; BAPO on policy) there is no first pass: the statistics
    come from the log-probs of the micro-batches' own forwards (the same numbers). A policy with ``prefix_once``
    (rung 3's) runs the few-shot prefix its prompts share once for all the micro-batches, forward and backward.
    Returns the statistics, entropy, mask, log-probs and the batch (its old log-probs the update's own, where
    ``batch.old_logp_from_update``).
    """
    B, mb = batch.input_ids.shape[0], cfg.micro_batch
    chunks = [slice(i, i + mb) for i in range(0, B, mb)]
    dev, own_old = policy.device, batch.old_logp_from_update
    mask, adv = batch.response_mask.to(dev), batch.advantages.to(dev)
    first_pass = needs_search_pass(rule, own_old)
    hold = first_pass and getattr(policy, "hold_graphs", False)
    once = getattr(policy, "prefix_once", None)        # rung 3: the prompts' shared prefix once for all micro-batches
    with once(batch.input_ids, batch.attention_mask, batch.start) if once else nullcontext():
        stats, own, scored, logp, batch = _micro_batches(policy, batch, rule, cfg, chunks, first_pass, hold)
    if scored is None:                          # no first pass: the statistics from the micro-batches' own log-probs
        scored, logp = own, torch.cat([lp for lp, _ in own])
        if own_old:
            batch = _own_old_logp(policy, batch, logp)
        with torch.no_grad():
            _, stats = policy_loss(logp, batch.old_logp.to(dev), adv, mask, rule, agg=cfg.agg,
                                   dual_clip=cfg.dual_clip)
    return stats, torch.cat([h for _, h in scored]), mask, logp, batch


def _micro_batches(policy, batch, rule, cfg, chunks, first_pass: bool, hold: bool):
    """:func:`_accumulate`'s passes: BAPO's search pass where ``first_pass``, then each micro-batch's loss and
    backward. Returns (statistics or None, each micro-batch's (log-probs, entropy), the search pass's or None, its
    log-probs or None, the batch)."""
    score = lambda s: policy.score(batch.input_ids[s], batch.attention_mask[s], batch.start, cfg.temperature)
    dev, own_old = policy.device, batch.old_logp_from_update
    mask, adv = batch.response_mask.to(dev), batch.advantages.to(dev)
    seqs, B = (mask.sum(1) > 0).float(), mask.shape[0]
    bounds, scored, stats, logp = rule, None, None, None
    if first_pass:
        scored = []                             # with hold: each micro-batch's graph, kept for its backward below
        for s in chunks:
            with torch.set_grad_enabled(hold and bool(mask[s].any())):
                scored.append(score(s))
        logp = torch.cat([lp.detach() for lp, _ in scored])
        if own_old:
            batch = _own_old_logp(policy, batch, logp)
        _, stats = policy_loss(logp, batch.old_logp.to(dev), adv, mask, rule, agg=cfg.agg, dual_clip=cfg.dual_clip)
        bounds = FixedBounds(lo=stats["c_low"], hi=stats["c_high"])
    old = batch.old_logp.to(dev)
    own = []                                    # each micro-batch's (log-probs, entropy) from its own forward
    for i, s in enumerate(chunks):
        if not mask[s].any():
            if scored is None:
                with torch.no_grad():
                    own.append(score(s))
            continue
        weight = {"token-mean": mask[s].sum() / mask.sum(), "seq-mean-token-mean": seqs[s].sum() / seqs.sum()
                  }.get(cfg.agg, torch.tensor(mask[s].shape[0] / B))
        logp_s, entropy_s = scored[i] if hold else score(s)
        old_s = logp_s.detach() if own_old and scored is None else old[s]
        loss, _ = policy_loss(logp_s, old_s, adv[s], mask[s], bounds, agg=cfg.agg, dual_clip=cfg.dual_clip)
        (loss * weight).backward()
        own.append((logp_s.detach(), entropy_s))
        if hold:
            scored[i] = own[-1]                 # its graph is spent: keep the numbers only
    return stats, own, scored, logp, batch


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
    ``config.json``, ``metrics.jsonl`` (one line per update), ``checkpoint.pt`` (and ``.lock``).

    The folder is locked for the run's life (:func:`~toy_rl.rl.run_folder.lock_run`: a second process
    gets RuntimeError). With ``resume``, a run already in the folder must have the same config, field by
    field, except that a longer run may extend a shorter one; its checkpoint and metrics must agree
    (:func:`_resume`). ``resume=False`` starts over. Ctrl-C leaves a run that resumes to the same records.

    ``on_update(record, batch, logp)``, if given, is called after every update with the step's
    metric record, the batch it trained on and the log-probs its loss saw (detached, before the step).
    """
    out = Path(out_dir)
    with lock_run(out):
        return _train(cfg, policy, task, out, resume, progress, heldout, on_update)


def _train(cfg, policy, task, out: Path, resume, progress, heldout, on_update) -> list[dict]:
    torch.manual_seed(cfg.seed)
    rule, label = cfg.rule_obj, rule_label(cfg.rule)
    source = BatchSource(policy, task, cfg.prompts, cfg.group_size, cfg.max_new_tokens, cfg.staleness,
                         cfg.mode, cfg.partial, cfg.temperature, cfg.advantage, cfg.seed)
    optimizer = make_optimizer(policy, cfg.lr)
    heldout = heldout if heldout is not None else task.heldout(cfg.eval_size)
    ckpt_path, config_path = out / CHECKPOINT, out / CONFIG

    identity = run_identity(cfg, policy, task)
    start, state = _resume(out, cfg, identity) if resume else (0, None)
    if not resume:
        ckpt_path.unlink(missing_ok=True)           # never resume into another run's checkpoint later
    log = Logbook(out / METRICS, resume_after=start - 1 if start else None)   # checks the log against it
    if state is not None:
        policy.set_weights(state["weights"])
        optimizer.load_state_dict(state["optimizer"])
        source.load_state_dict(state["source"])
        torch.set_rng_state(state["torch_rng"])
    write_text(config_path, json.dumps(cfg.to_dict(), indent=1))
    policy.eval()

    bar = tqdm(range(start, cfg.steps), initial=start, total=cfg.steps, disable=not progress, desc=f"RL {label}")
    for step in bar:
        t0 = time.perf_counter()
        record = {"step": step, "rule": label, "staleness": cfg.staleness}
        if cfg.eval_every and step % cfg.eval_every == 0:
            record["accuracy"] = evaluate(policy, task, heldout, cfg.max_new_tokens)
        batch = source.next(step)
        if batch is not None:
            record.update(batch_metrics(batch, step))
            stats, logp, batch = _update(policy, optimizer, batch, rule, cfg)
            record.update(stats)
            if on_update is not None:
                on_update(record, batch, logp)
        record["seconds"] = time.perf_counter() - t0
        log.write(record)
        bar.set_postfix({k: f"{record[k]:.3f}" for k in ("reward_mean", "entropy", "c_high") if k in record})
        if (step + 1) % cfg.checkpoint_every == 0 or step + 1 == cfg.steps:
            _save_checkpoint(ckpt_path, step + 1, policy, optimizer, source, identity)
    final = {"step": cfg.steps, "rule": label, "staleness": cfg.staleness, "final": True,
             "accuracy": evaluate(policy, task, heldout, cfg.max_new_tokens)}
    records = [r for r in log.read() if not r.get("final")]
    log.write(final)
    return records + [final]


CONFIG, METRICS, CHECKPOINT = "config.json", "metrics.jsonl", "checkpoint.pt"
CHECKPOINT_KEYS = ("step", "weights", "optimizer", "source", "torch_rng")


def run_identity(cfg: RLConfig, policy, task) -> dict:
    """What makes a run this run, saved in its checkpoint and checked on resume: every config field but
    ``steps`` (a longer run may extend a shorter one) -- rule and its parameters, seed, staleness, ... --, the
    task (name and settings) and the kind of policy. Plain values only."""
    params = task.params() if hasattr(task, "params") else {}
    return json.loads(json.dumps({"config": {k: v for k, v in cfg.to_dict().items() if k != "steps"},
                                  "task": getattr(task, "name", type(task).__name__), "task_params": params,
                                  "policy": type(policy).__name__}, default=str))


def identity_mismatch(saved: dict, cfg: RLConfig, now: dict) -> str | None:
    """Where a checkpoint's saved :func:`run_identity` differs from this run's (``cfg``'s, ``now``), as "field:
    saved vs now", or None. Config fields are compared as :func:`~toy_rl.rl.config.config_differences` does (a
    field added since the checkpoint was saved counts as its default)."""
    diff = config_differences({**saved.get("config", {}), "steps": cfg.steps}, cfg)
    diff.update({k: (saved.get(k), v) for k, v in now.items() if k != "config" and saved.get(k) != v})
    if not diff:
        return None
    key = sorted(diff)[0]
    return f"{key}: {diff[key][0]!r} in the checkpoint, {diff[key][1]!r} in this run"


def _save_checkpoint(path: Path, step: int, policy, optimizer, source, identity: dict) -> None:
    """Weights, optimizer, random states and pending rollouts after ``step`` updates, and the run's identity
    (:func:`run_identity`): tensors and plain values only, written atomically
    (:func:`~toy_rl.rl.run_folder.save_state`)."""
    save_state(path, {"step": step, "weights": policy.get_weights(), "optimizer": optimizer.state_dict(),
                      "source": source.state_dict(), "torch_rng": torch.get_rng_state(), "identity": identity})


def read_config(out_dir) -> dict | None:
    """The config.json of the run in ``out_dir`` as a dict (None if there is none); ValueError if damaged."""
    path = Path(out_dir) / CONFIG
    if not path.is_file():
        return None
    try:
        saved = json.loads(path.read_text())
    except ValueError as e:
        raise ValueError(f"{path} is damaged ({e}); delete the run folder, or start the run over (resume=False)") from None
    if not isinstance(saved, dict):
        raise ValueError(f"{path} does not hold a run config (a JSON object); start the run over (resume=False)")
    return saved


def _same_kind(saved, value) -> bool:
    """Could ``saved`` (read from JSON) be a value of ``value``'s field? Numbers match numbers (JSON writes 1.0
    as 1.0 but a user may write 1), never strings or booleans."""
    number = (int, float)
    if isinstance(value, bool) or isinstance(saved, bool):
        return isinstance(saved, bool) == isinstance(value, bool)
    if isinstance(value, number):
        return isinstance(saved, number) and (isinstance(value, float) or float(saved).is_integer())
    if isinstance(value, (list, tuple)):
        return isinstance(saved, (list, tuple))
    return isinstance(saved, type(value))


def check_same_run(out_dir, cfg: RLConfig) -> None:
    """ValueError unless the run saved in ``out_dir`` (if any) may continue as ``cfg``: every field equal,
    except that ``cfg.steps`` may be larger (a longer run extends a shorter one; never the reverse, which
    would report the longer run's model as the shorter run's result)."""
    saved = read_config(out_dir)
    if saved is None:
        return
    for name, value in cfg.to_dict().items():
        kept = saved.get(name)
        if value is not None and kept is not None and not _same_kind(kept, value):
            raise ValueError(f"{Path(out_dir) / CONFIG}: {name!r} is {kept!r} ({type(kept).__name__}), not a "
                             f"{type(value).__name__}; the file was edited or damaged: fix it, or start over "
                             "(resume=False)")
    diff = config_differences(saved, cfg)
    if "steps" in diff and diff["steps"][0] > cfg.steps:
        raise ValueError(f"{out_dir} holds a run of {diff['steps'][0]} updates; this config asks for {cfg.steps}: "
                         "a shorter run cannot reuse it (its model has seen more updates); use another out_dir, "
                         "or resume=False to start over")
    diff.pop("steps", None)
    if diff:
        raise ValueError(f"{out_dir} holds a run with another config (saved vs now: {diff}); "
                         "use another out_dir or resume=False")


def _resume(out: Path, cfg, identity: dict) -> tuple[int, dict | None]:
    """(updates already done in ``out``, the checkpoint's state), or (0, None) for a new run; nothing is
    changed. ValueError if the saved config differs (:func:`check_same_run`), the checkpoint is another run's
    (its :func:`run_identity` differs: a checkpoint copied from another seed or rule; checkpoints from before
    identities were saved are trusted), or it is damaged, unsafe (:func:`~toy_rl.rl.run_folder.load_state`) or
    without its config.json. The metrics are checked against the returned step by
    :class:`~toy_rl.rl.logbook.Logbook` (``resume_after``)."""
    ckpt_path = out / CHECKPOINT
    check_same_run(out, cfg)
    if not ckpt_path.exists():
        return 0, None
    if not (out / CONFIG).is_file():
        raise ValueError(f"{ckpt_path} has no {CONFIG} beside it, so its config cannot be checked; "
                         "start the run over (resume=False)")
    state = load_state(ckpt_path, classes=legacy_classes())     # earlier toy_rl pickled pending rollouts
    if not (isinstance(state, dict) and all(k in state for k in CHECKPOINT_KEYS)):
        raise ValueError(f"{ckpt_path} is not an RL checkpoint (expected keys {CHECKPOINT_KEYS}); "
                         "start the run over (resume=False)")
    mismatch = identity_mismatch(state["identity"], cfg, identity) if "identity" in state else None
    if mismatch:
        raise ValueError(f"{ckpt_path} belongs to another run ({mismatch}); delete it, or start the run over "
                         "(resume=False)")
    step = state["step"]
    if not (isinstance(step, int) and 0 < step <= cfg.steps):
        raise ValueError(f"{ckpt_path} is after update {step!r}, outside this run's 1..{cfg.steps}; "
                         "start the run over (resume=False)")
    return step, state
