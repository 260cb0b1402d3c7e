"""Question 6, entropy collapse: clip-higher against an entropy bonus (huggingface/trl#3320, which asked for
adaptive entropy control in GRPOTrainer; TRL added fixed and adaptive bonuses for it).

Two knobs that both claim to keep entropy up act on different things. Clip-higher (DAPO) raises c_high in
min(r·A, clip(r, c_low, c_high)·A) (BAPO Eq. 3): it lets positive tokens whose ratio grew past 1.2 keep their
gradient a little longer, so it can only matter where r ≠ 1 (stale data) and only through tokens that were
sampled and rewarded. An entropy bonus β·H adds ∂H/∂z = −π(log π + H) to every update, stale or not, sampled
or not: it pulls probability from the likely tokens to all the others.

The test bed is the bandit's "trap" preset: a likely token worth 0.5, rare tokens worth 1. Reinforcing the trap
is the easy gradient; once the policy has collapsed onto it, groups are all-trap, their advantages are 0, and
the clipped loss has nothing left to push with. Each variant is trained on the same seeds and compared with
the symmetric rule by a paired t-test per seed (:func:`toy_rl.stats.paired_test`).
"""
from __future__ import annotations

from ...clipping import ClipHigher, Symmetric
from ...stats import paired_test
from ..config import BanditConfig
from ..entropy_bonus import EntropyBonus
from ..schedule import Schedule
from ..simulate import simulate

VARIANTS = {
    "symmetric": (Symmetric(), EntropyBonus()),
    "clip-higher": (ClipHigher(), EntropyBonus()),
    "clip-higher 0.2/1.0": (ClipHigher(eps_low=0.2, eps_high=1.0), EntropyBonus()),
    "symmetric + β 0.02": (Symmetric(), EntropyBonus(coef=0.02)),
    "symmetric + β 0.1": (Symmetric(), EntropyBonus(coef=0.1)),
    "symmetric + adaptive → 1.0": (Symmetric(), EntropyBonus(coef=0.0, target=1.0, delta=0.005, coef_max=0.5)),
}
ENDPOINTS = ("final_entropy", "final_reward", "best_found", "mean_reward")


def endpoints(run) -> dict:
    """Per seed: entropy and expected reward after the last update, the share of contexts whose best tokens
    hold most of the probability (policy.best_found), and the expected reward averaged over training."""
    return dict(final_entropy=run.final("entropy"), final_reward=run.final("expected_reward"),
                best_found=run.final("best_found"), mean_reward=run.metrics["expected_reward"].mean(1))


def entropy_experiment(config: BanditConfig = BanditConfig(preset="trap"), seeds=range(8),
                       schedules=(Schedule(), Schedule(epochs=4)), variants=VARIANTS) -> dict:
    """Every variant under every schedule, on the same seeds. Returns ``{"runs": {(schedule label, variant):
    BanditRun}, "rows": {"<schedule> · <variant>": numbers}}``: the endpoints' means, and for each endpoint
    ``d_<endpoint>`` / ``p_<endpoint>`` (variant − symmetric, paired by seed, two-sided p) against the
    first variant under the same schedule."""
    runs, rows = {}, {}
    names = list(variants)
    for s in schedules:
        ref = None
        for name in names:
            rule, bonus = variants[name]
            run = runs[s.label(), name] = simulate(config, rule, seeds, schedule=s, bonus=bonus)
            e = endpoints(run)
            ref = ref or e
            row = {k: float(v.mean()) for k, v in e.items()}
            for k in ENDPOINTS:
                t = paired_test(e[k], ref[k])
                row[f"d_{k}"], row[f"p_{k}"] = t["diff"], t["p"]
            rows[f"{s.label()} · {name}"] = row
    return dict(runs=runs, rows=rows)


def best_variant(rows: dict, schedule_label: str, endpoint: str = "best_found") -> tuple[str, float]:
    """The variant with the highest mean ``endpoint`` under one schedule, and that mean."""
    mine = {k.split(" · ", 1)[1]: r[endpoint] for k, r in rows.items() if k.split(" · ", 1)[0] == schedule_label}
    name = max(mine, key=mine.get)
    return name, mine[name]
