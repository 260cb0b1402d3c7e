"""Notebook 06's view of one stored batch re-clipped at other bounds (:func:`toy_rl.lm.measures.reclip`, i.e.
the clipping core itself: nothing about clipping is recomputed here)."""
from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from ...clipping import clipped_mask, token_ratio
from ...verdicts import RHO0
from ..measures import reclip


def bounds_view(batch: dict, c_low: float, c_high: float, grid=None):
    """Re-clip one stored batch (:func:`toy_rl.lm.run.load_batch`) with the bounds [c_low, c_high].

    Left: the token ratios r = π_θ/π_behaviour of that update, positive-advantage tokens above,
    negative below, with the bounds; the tokens that lose their gradient are the green ones right of
    c_high and the red ones left of c_low. Right: ρ and the clip fractions as c_high sweeps ``grid``
    at this c_low (the clipping core at every point), the slider's c_high marked, and where BAPO's
    search stops on this batch. Returns (figure, numbers): ``c_low``, ``c_high``, ``rho``,
    ``clip_frac_low``, ``clip_frac_high``, ``pos_mass``, ``neg_mass`` at the slider's bounds, BAPO's
    ``bapo_c_low``, ``bapo_c_high``, ``bapo_rho``, ``bapo_rho_before``, and the bounds the run's rule
    used on it (``logged_c_low``, ``logged_c_high``).
    """
    rc = reclip(batch, c_low, c_high, grid)
    here, bapo, grid, sweep = rc["here"], rc["bapo"], rc["grid"], rc["sweep"]

    mask = batch["mask"].bool()
    ratio = token_ratio(batch["logp"], batch["old_logp"])
    adv = batch["advantages"]
    adv = adv[:, None].expand_as(ratio) if adv.dim() == 1 else adv
    r, a = ratio[mask], adv[mask]
    lost_hi = clipped_mask(r, a, None, c_high).numpy()
    lost_lo = clipped_mask(r, a, c_low, None).numpy()
    r, a = r.numpy(), a.numpy()

    fig = Figure(figsize=(13, 3.8), layout="constrained")
    ax_r, ax_s = fig.subplots(1, 2, gridspec_kw=dict(width_ratios=[1.2, 1]))
    rng = np.random.default_rng(0)
    jitter = rng.uniform(-0.3, 0.3, size=len(r))
    pos, neg = a > 0, a < 0
    for sel, y, colour in ((pos & ~lost_hi, 1, "tab:green"), (neg & ~lost_lo, -1, "tab:red"),
                           (~pos & ~neg, 0, "0.6")):
        ax_r.scatter(r[sel], y + jitter[sel], s=8, color=colour, alpha=0.5)
    ax_r.scatter(r[lost_hi], 1 + jitter[lost_hi], s=22, marker="x", color="tab:green", label="clipped (no gradient)")
    ax_r.scatter(r[lost_lo], -1 + jitter[lost_lo], s=22, marker="x", color="tab:red")
    ax_r.axvspan(c_low, c_high, color="tab:blue", alpha=0.08, label=f"[c_low, c_high] = [{c_low:.2f}, {c_high:.2f}]")
    ax_r.axvline(1.0, color="0.5", lw=0.8)
    ax_r.set_xscale("log")
    ax_r.set_yticks([-1, 0, 1], ["A < 0", "A = 0", "A > 0"])
    ax_r.set_xlabel("ratio r = π_θ / π_behaviour (log scale)")
    ax_r.set_title(f"update {batch.get('step')}: {len(r)} tokens, |log r| up to {float(np.abs(np.log(r)).max()):.2f}",
                   fontsize=10)
    ax_r.legend(fontsize=7, loc="upper left")

    ax_s.plot(grid, [s["rho"] for s in sweep], color="k", label="ρ (positive share)")
    ax_s.plot(grid, [s["clip_frac_high"] for s in sweep], color="tab:green", label="clip fraction high")
    ax_s.axhline(here["clip_frac_low"], color="tab:red", ls="--", label="clip fraction low (c_low only)")
    ax_s.axhline(RHO0, color="k", ls=":", lw=1, label=f"ρ0 = {RHO0}")
    ax_s.axvline(c_high, color="tab:blue", lw=1.5, label=f"your c_high: ρ = {here['rho']:.3f}")
    ax_s.axvline(bapo["c_high"], color="tab:purple", ls="--", lw=1.2,
                 label=f"BAPO stops at [{bapo['c_low']:.2f}, {bapo['c_high']:.2f}]")
    ax_s.set_xlabel(f"c_high (c_low = {c_low:.2f})")
    ax_s.set_ylim(-0.02, 1.02)
    ax_s.legend(fontsize=7, loc="upper right")
    ax_s.set_title("the clipping core on this batch", fontsize=10)

    numbers = {k: here[k] for k in ("c_low", "c_high", "rho", "clip_frac_low", "clip_frac_high", "pos_mass",
                                    "neg_mass")}
    numbers.update(bapo_c_low=bapo["c_low"], bapo_c_high=bapo["c_high"], bapo_rho=bapo["rho"],
                   bapo_rho_before=bapo["rho_before"], logged_c_low=float(batch["c_low"]),
                   logged_c_high=float(batch["c_high"]), tokens=int(mask.sum()))
    return fig, numbers


def bounds_callback(batch: dict):
    """What ``interact`` calls: (c_low, c_high) -> the numbers of :func:`bounds_view`; displays the figure."""
    from IPython.display import display

    def callback(c_low: float, c_high: float) -> dict:
        fig, numbers = bounds_view(batch, c_low, c_high)
        display(fig)
        return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in numbers.items()}
    return callback
