"""The clipping tour: the three rules on the same batches, from on-policy to very stale.

For each staleness level (the spread of log r = logp − old_logp) it builds one
synthetic GRPO batch (:func:`toy_rl.synthetic.stale_batch`), runs
``policy_loss`` with every rule, and records what a learner should look at:
the bounds, ρ (positives' share of the loss), the sign-aware clip fractions
and the loss. Drift 0 comes first: on-policy, r ≡ 1, every clip fraction is 0
and the three rules agree.
"""
from __future__ import annotations

import json
from pathlib import Path

from .clipping import BAPO, ClipHigher, Symmetric, policy_loss
from .synthetic import stale_batch

DRIFTS = (0.0, 0.1, 0.3, 0.6)
COLUMNS = ("c_low", "c_high", "rho_before", "rho", "clip_frac_low", "clip_frac_high", "neg_adv_frac", "loss")


def default_rules() -> dict:
    return {"symmetric": Symmetric(), "clip-higher": ClipHigher(), "bapo": BAPO()}


def run_tour(drifts=DRIFTS, rules: dict | None = None, seed: int = 0, **batch_kwargs) -> list[dict]:
    """One row per (drift, rule): the rule's stats on the same batch."""
    rules = rules or default_rules()
    rows = []
    for drift in drifts:
        b = stale_batch(drift=drift, seed=seed, **batch_kwargs)
        for name, rule in rules.items():
            _, stats = policy_loss(b.logp, b.old_logp, b.advantages, b.mask, rule)
            rows.append({"drift": drift, "rule": name, **{k: stats[k] for k in COLUMNS}})
    return rows


def format_table(rows: list[dict]) -> str:
    head = f"{'drift':>5}  {'rule':<11}" + "".join(f"{c:>15}" for c in COLUMNS)
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r['drift']:>5.2f}  {r['rule']:<11}" + "".join(f"{r[c]:>15.4f}" for c in COLUMNS))
    return "\n".join(lines)


def plot_tour(rows: list[dict], path: Path) -> None:
    """Three panels against drift: c_high, ρ, and the clip fractions, one line per rule."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rules = list(dict.fromkeys(r["rule"] for r in rows))
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.6))
    for rule in rules:
        rs = [r for r in rows if r["rule"] == rule]
        x = [r["drift"] for r in rs]
        axes[0].plot(x, [r["c_high"] for r in rs], "o-", label=rule)
        axes[0].plot(x, [r["c_low"] for r in rs], "o--", color=axes[0].lines[-1].get_color())
        axes[1].plot(x, [r["rho"] for r in rs], "o-", label=rule)
        axes[2].plot(x, [r["clip_frac_low"] + r["clip_frac_high"] for r in rs], "o-", label=rule)
    axes[1].axhline(BAPO().rho0, color="grey", lw=0.8, ls=":", label="BAPO target ρ0")
    titles = ("bounds (solid c_high, dashed c_low)", "ρ = positive share of the loss", "tokens clipped (no gradient)")
    for ax, title in zip(axes, titles):
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("staleness: std of log r")
    axes[1].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def save_tour(rows: list[dict], out_dir: Path, plot: bool = True) -> list[Path]:
    """Write rows.jsonl (one JSON object per row), table.txt and tour.png into ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / "tour.jsonl", out_dir / "table.txt"]
    paths[0].write_text("".join(json.dumps(r) + "\n" for r in rows))
    paths[1].write_text(format_table(rows) + "\n")
    if plot:
        paths.append(out_dir / "tour.png")
        plot_tour(rows, paths[-1])
    return paths
