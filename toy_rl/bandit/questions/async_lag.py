"""Question 5, "fully async is one step stale" (verl-project/verl#4449): if the generator keeps sampling
with the weights it has while the trainer trains, each rollout is one update behind, whatever the knobs say.

The thread reads verl's fully-async pipeline at ``trigger_parameter_sync_step=1, staleness_threshold=0`` (which
its documentation calls on-policy) and finds the generator resuming with the old weights W₀ while the trainer
is still training on a W₀ batch: one-step-off-policy. Here that is ``Schedule(lag=1)``: the trainer at version
t trains on a rollout sampled by version t − 1.

What the logs show then depends on π_old, the denominator of r (Eq. 8):

* the generator's own log-probs (the behaviour policy): r ≠ 1 from the first update, the clip can act;
* log-probs recomputed by the trainer before it updates (``recompute_old``): r ≡ 1 on the first mini-batch,
  every clip fraction 0, the run *looks* on-policy, yet its samples are one update old. The gap between the
  generator and π_old is then invisible to the clip (``behaviour_kl`` > ``approx_kl``) and needs its own
  correction (importance weights π_old / π_behaviour, as verl's rollout-correction options add).
"""
from __future__ import annotations

from ..config import BanditConfig
from ..schedule import Schedule
from ..simulate import simulate

SCHEDULES = (Schedule(), Schedule(lag=1), Schedule(lag=1, recompute_old=True),
             Schedule(minibatches=4, lag=1, recompute_old=True))


def one_step_off_experiment(config: BanditConfig = BanditConfig(), seeds=range(8), schedules=SCHEDULES,
                            rule="symmetric") -> dict:
    """Each schedule on the same seeds. Returns ``{"runs": {label: BanditRun}, "rows": {label: numbers}}``
    with, per schedule: mean ``data_age`` and ``ratio_age`` (updates), ``clip_frac`` (mean) and
    ``updates_clipping`` (share of updates with any token clipped), ``approx_kl`` (k3 KL to π_old, what a
    trainer logs) and ``behaviour_kl`` (to the policy that sampled), and the expected reward averaged over
    training (``mean_reward``) and at the end (``final_reward``)."""
    runs = {s.label(): simulate(config, rule, seeds, schedule=s) for s in schedules}
    rows = {}
    for label, run in runs.items():
        m = run.metrics
        rows[label] = dict(data_age=float(m["staleness"].mean()), ratio_age=float(m["ratio_age"].mean()),
                           clip_frac=float(m["clip_frac"].mean()), updates_clipping=float((m["clip_frac"] > 0).mean()),
                           approx_kl=float(m["approx_kl"].mean()), behaviour_kl=float(m["behaviour_kl"].mean()),
                           mean_reward=float(m["expected_reward"].mean()),
                           final_reward=float(run.final("expected_reward").mean()))
    return dict(runs=runs, rows=rows)


def looks_on_policy(row: dict) -> bool:
    """What a trainer's logs alone would say: nothing clipped and zero KL to π_old."""
    return row["updates_clipping"] == 0 and row["approx_kl"] == 0


def is_on_policy(row: dict) -> bool:
    """What is true: every update's data was sampled by the policy being trained."""
    return row["data_age"] == 0 and row["behaviour_kl"] == 0
