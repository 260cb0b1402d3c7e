"""The clipping tour: the three rules on the same batches, from on-policy to very stale.

For each staleness level (the spread of log r = logp − old_logp) it builds one
synthetic GRPO batch (:func:`toy_rl.synthetic.stale_batch`), runs
``policy_loss`` with every rule, and records what a learner should look at:
the bounds, ρ (positives' share of the loss), the sign-aware clip fractions
and the loss. Drift 0 comes first: on-policy, r ≡ 1, every clip fraction is 0
and the three rules agree on the loss. BAPO may still move its bounds there (the
synthetic batch's wrong answers are longer: ρ = 1/(1 + λ) < ρ0, docs/protocol.md
§1) without reaching ρ0, since nothing is clipped for wider bounds to give back:
``reached`` says so, row by row.
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
            reached = stats.get("rho_reached")            # BAPO only: did the search reach ρ0?
            rows.append({"drift": drift, "rule": name, **{k: stats[k] for k in COLUMNS},
                         "reached": None if reached is None else bool(reached)})
    return rows


def format_table(rows: list[dict]) -> str:
    """The rows as text; ``ρ0 reached`` is "no" where BAPO's search ran to the end of its path without reaching
    its target (its bounds are then the caps, not a balance), "–" for the fixed rules."""
    head = f"{'drift':>5}  {'rule':<11}" + "".join(f"{c:>15}" for c in COLUMNS) + f"{'ρ0 reached':>12}"
    lines = [head, "-" * len(head)]
    for r in rows:
        reached = {None: "–", True: "yes", False: "no"}[r.get("reached")]
        lines.append(f"{r['drift']:>5.2f}  {r['rule']:<11}" + "".join(f"{r[c]:>15.4f}" for c in COLUMNS)
                     + f"{reached:>12}")
    if any(r.get("reached") is False for r in rows):
        lines.append("ρ0 reached = no: BAPO's search ran to the end of its path (c_high 3.0, c_low 0.9) with ρ still "
                     "below its target")
    return "\n".join(lines)


STYLES = {"symmetric": dict(ls="-", marker="o", ms=7), "clip-higher": dict(ls="--", marker="s", ms=5),
          "bapo": dict(ls="-", marker="^", ms=6)}      # distinct markers: symmetric's c_low lies under clip-higher's


def plot_tour(rows: list[dict], path: Path) -> None:
    """Four panels against drift, one line per rule: c_low, c_high, ρ (with BAPO's target), tokens clipped.
    A BAPO point that did not reach ρ0 is drawn hollow."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rules = list(dict.fromkeys(r["rule"] for r in rows))
    fig, axes = plt.subplots(1, 4, figsize=(15, 3.8))
    panels = (("c_low", "c_low (lower ratio bound)"), ("c_high", "c_high (upper ratio bound)"),
              ("rho", "ρ: positive share of the loss"), ("clipped", "share of tokens clipped"))
    for i, rule in enumerate(rules):
        rs = [r for r in rows if r["rule"] == rule]
        x = [r["drift"] for r in rs]
        style = STYLES.get(rule, dict(ls="-", marker="o", ms=5))
        for ax, (key, _) in zip(axes, panels):
            y = [r["clip_frac_low"] + r["clip_frac_high"] if key == "clipped" else r[key] for r in rs]
            line, = ax.plot(x, y, label=rule, color=f"C{i}", **style)
            missed = [(xi, yi) for xi, yi, r in zip(x, y, rs) if r.get("reached") is False]
            if missed:
                ax.plot(*zip(*missed), ls="none", marker=style["marker"], ms=style["ms"] + 4, mfc="white",
                        color=line.get_color(), label="BAPO: ρ0 not reached" if key == "rho" else None)
    axes[2].axhline(BAPO().rho0, color="grey", lw=0.8, ls=":", label="BAPO target ρ0")
    for ax, (_, ylabel) in zip(axes, panels):
        ax.set(xlabel="staleness: std of log r", ylabel=ylabel)
        ax.margins(y=0.15)
    axes[2].legend(fontsize=8)
    fig.suptitle("The three rules on the same synthetic GRPO batch, from on-policy (drift 0) to very stale",
                 fontsize=11)
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
