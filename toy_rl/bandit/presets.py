"""Named whole configurations of the bandit: the control where BAPO idles, and where its mechanism runs.

    from toy_rl.bandit.presets import PRESETS, DEFAULT
    config = PRESETS[DEFAULT]                         # "long-failures"

BAPO (arXiv 2510.18927, Alg. 1) moves its bounds only when the positive share ρ
at its start [0.6, 1.2] is below ρ0 = 0.4. On-policy ρ = 1/(1 + λ), λ the wrong
answers' tokens over the right answers' (docs/protocol.md, section 1), so the
one-token bandit (λ = 1, ρ = 0.5) is the *balanced* regime: there "BAPO" is the
fixed rule [0.6, 1.2] in all but 5–16 % of updates. The presets:

    "balanced"            ``BanditConfig()`` unchanged: one-token answers, "rare-correct".
                          The control: teaches why BAPO sometimes does nothing.
    "long-failures"       DEFAULT. "rare-correct" with answers of L = 4 tokens when right and
                          round(2·4) = 8 when wrong (λ = 2, on-policy ρ = 1/3 < 0.4), η = 3.0.
    "trap"                one-token "trap" rewards (a likely 0.5 token, rare 1 tokens): the
                          exploration task in the balanced regime, the control of the next.
    "trap-long-failures"  the trap with L = 2 and λ = 4: right answers 2 tokens, the trap
                          (reward 0.5) round(2·2.5) = 5, failures 8; η = 2.5.

How they were chosen (before any rule was compared, for the mechanism only):

* λ. ρ0 = 0.4 needs λ > 1.5; λ = 1.5 sits exactly on ρ = 0.4 on-policy, where
  rounding decides, so the default takes λ = 2. The trap's answers interpolate
  in length (answers.py), so a trap-vs-failure group has λ = 8/5 = 1.6 only; it
  needs λ = 4 to sit in the negatives-dominate regime.
* L. Four tokens per right answer make the decision one token among several, as
  in a language model, where most tokens of an answer are not the decisive ones.
* η. A token-mean loss divides each token's gradient by the batch's token count,
  so longer answers take smaller steps per token. :func:`long_answers` scales η by
  the mean of the right and wrong lengths, η = 0.5·(L + round(λ·L))/2, which keeps
  the on-policy learning speed of the control (all rules coincide on-policy, so this
  favours none): expected reward after 75 on-policy updates 0.93 vs 0.94 for
  "balanced", and the symmetric rule's KL per update at staleness 2 0.0040 vs 0.0033.

The pilot gate (:func:`toy_rl.bandit.pilot.pilot`, 8 seeds, 150 updates, staleness 2;
shared 2-core CPU, one thread, ~3 s each)::

    PYTHONPATH=. python -c "from toy_rl.bandit.presets import PRESETS; from toy_rl.bandit.pilot import pilot; \\
        import json; print(json.dumps({n: pilot(c) for n, c in PRESETS.items()}, indent=1))"

    preset               mode   regime               ρ<ρ0   moved (early/late)   mean c_high  c_low
    balanced             reuse  balanced             0.13   0.10 (0.19/0.01)     1.22         0.60
    long-failures        reuse  negatives-dominate   0.94   0.72 (0.94/0.51)     2.35         0.75
    long-failures        lag    negatives-dominate   1.00   0.77 (0.94/0.60)     2.59         0.83
    trap                 reuse  balanced             0.10   0.07 (0.05/0.08)     1.22         0.60
    trap-long-failures   reuse  negatives-dominate   0.72   0.49 (0.62/0.35)     1.88         0.70
    trap-long-failures   lag    negatives-dominate   0.99   0.63 (0.84/0.42)     2.32         0.77

(ρ<ρ0: share of the updates with a defined ρ whose ρ before the search is below
0.4; moved: share of all updates whose bounds left [0.6, 1.2]; updates whose groups
are all right or all wrong carry no gradient and cannot move it.)

Is a wider trust region just a larger step? Check with the step-size helpers of
:mod:`toy_rl.bandit.comparison` (η as factors of the preset's η; tuning seeds apart
from test seeds)::

    from toy_rl.bandit.comparison import step_size_sweep, tuned_comparison
    step_size_sweep("long-failures", lrs=(0.5, 1, 2, 4, 8, 16), seeds=range(100, 106), staleness=4)
    tuned_comparison("trap-long-failures", seeds=range(10), staleness=2)   # each rule at its best η

Measured (6–12 tuning seeds, reuse): on "long-failures" every rule keeps improving
up to 16× η and at 16× the three tie on mean reward (0.953 at staleness 2, 0.92 at
4; KL per update ≈ 0.03 / 0.075 for all): BAPO's lead at the preset's η is what a
larger step also buys. On "trap-long-failures" the symmetric rule stays at
P(best found) ≈ 0.2 for η up to 16× (KL up to 0.06) while BAPO reaches 0.42–0.58 at
1–2× (KL ≤ 0.014): there the wide upper bound is not a larger step in disguise
(the fixed [0.8, 2.0] does as well as BAPO; see comparison.py).

The presets keep ``staleness=0`` (the on-policy reference, where every rule gives the
same run); comparisons and the pilot set the staleness (protocol.md, section 4).
"""
from __future__ import annotations

from dataclasses import replace

from .config import BanditConfig

BASE_LR = 0.5       # the one-token bandit's η


def long_answers(config: BanditConfig, answer_len: int, length_ratio: float, base_lr: float = BASE_LR) -> BanditConfig:
    """``config`` with multi-token answers (L, λ) and η = base_lr·(L + round(λ·L))/2 (see module docstring)."""
    out = replace(config, answer_len=answer_len, length_ratio=length_ratio)
    return replace(out, lr=base_lr * (out.answer_len + out.wrong_len) / 2)


PRESETS = {
    "balanced": BanditConfig(),
    "long-failures": long_answers(BanditConfig(), answer_len=4, length_ratio=2.0),
    "trap": BanditConfig(preset="trap"),
    "trap-long-failures": long_answers(BanditConfig(preset="trap"), answer_len=2, length_ratio=4.0),
}
DEFAULT = "long-failures"
CONTROL = "balanced"


def get_preset(name: str) -> BanditConfig:
    """The named configuration (a frozen BanditConfig; change fields with dataclasses.replace)."""
    if name not in PRESETS:
        raise ValueError(f"preset must be one of {sorted(PRESETS)}; got {name!r}")
    return PRESETS[name]


def as_config(config: BanditConfig | str) -> BanditConfig:
    """The BanditConfig a preset name stands for (:func:`get_preset`); a BanditConfig passes as it is. Rung 1's one
    door where a name becomes the object (as :func:`toy_rl.arithmetic.presets.as_preset` is rung 2's): the functions
    a notebook or a command calls with a name use it (``comparison.compare``, ``step_size_sweep``,
    ``tuned_comparison``)."""
    if isinstance(config, str):
        return get_preset(config)
    if not isinstance(config, BanditConfig):
        raise ValueError(f"config must be a preset name or a BanditConfig; got {config!r}")
    return config
