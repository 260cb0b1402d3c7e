"""Notebook 07's closing table: one computed line per question, from what its experiment returned (so the
answers follow the runs if a seed or a setting changes)."""
from __future__ import annotations

import numpy as np

from .async_lag import is_on_policy, looks_on_policy
from .entropy_collapse import best_variant


def _same(gap: float) -> str:
    return "the same run" if gap == 0 else "different runs"


def answers(q1: dict, q2: dict, q3: dict, q4: dict, q5: dict, q6: dict, schedule_label: str = "epochs 4") -> list:
    """Lines answering the six questions; arguments are the six experiments' results in notebook order
    (q3 and q4 are the rows of clip_count_table and negative_branch_table)."""
    first, *rest = q1["rows"].values()
    line = (f"1 clip ratio always 0: with one update per rollout the largest |r − 1| on fresh data was "
            f"{first['max_r_minus_1_fresh']:.1e} and the clip fraction {first['clip_frac_fresh']:.1e}; the rules gave "
            f"{_same(first['rule_gap'])}; expected reward {first['reward_start']:.2f} → {first['reward_end']:.2f}")
    if rest:
        line += f". A second pass clipped something in {rest[0]['updates_clipping']:.0%} of its updates"
    lines = [line]
    parts = []
    for label, r in q2["rows"].items():
        part = f"{label}: {_same(r['rule_gap'])} under clip-higher and symmetric, positive tokens clipped in " \
               f"{r['updates_clipping_high']:.0%} of updates"
        if r["high_later"] == r["high_later"]:                 # more than one mini-batch
            part += f" (share of tokens: {r['high_first']:.3f} on the first mini-batch, {r['high_later']:.3f} after)"
        parts.append(part)
    lines.append("2 one epoch: " + "; ".join(parts))
    dev = max(abs(r["sign_aware"] - r["zero_gradient"]) for r in q3.values())
    split = max(abs(r["out_of_bounds"] - r["sign_aware"] - r["min_picks_rA"] - r["outside_with_A_zero"])
                for r in q3.values())
    over = np.mean([r["out_of_bounds"] / r["sign_aware"] for r in q3.values() if r["sign_aware"] > 0])
    lines.append(f"3 sign-aware: it equals the share of tokens with zero gradient (largest gap {dev:.1e}); the "
                 f"sign-blind count is on average {over:.1f}× larger, the rest being tokens the min leaves unclipped "
                 f"(identity off by {split:.1e})")
    last = list(q4.values())[-1]
    lines.append(f"4 dual-clip: at the largest drift a negative token's weight reached {last['max_w_neg']:.3g} "
                 f"without the cap and {last['max_w_neg_dual']:.3g} with it (largest positive "
                 f"{last['max_w_pos']:.3g}); negatives beyond c carried {last['their_weight_share']:.0%} of the "
                 f"gradient; TRL's δ = dual-clip up to {max(r['two_sided_gap'] for r in q4.values()):.1e}")
    lines.append("5 one step stale: " + "; ".join(
        f"{label}: looks on-policy {'yes' if looks_on_policy(r) else 'no'}, is {'yes' if is_on_policy(r) else 'no'}"
        for label, r in q5["rows"].items()))
    name, value = best_variant(q6["rows"], schedule_label)
    sym = q6["rows"][f"{schedule_label} · symmetric"]["best_found"]
    lines.append(f"6 entropy ({schedule_label}): most contexts on a best token with {name} ({value:.2f}, symmetric "
                 f"{sym:.2f})")
    return lines
