"""Notebook 03 · BAPO's balance: the gradient-carrying ρ, and one step of Algorithm 1."""

TOL = 1e-9     # 0.1 + 0.2 > 0.3 in floating point: compare bounds with a little slack


def grad_rho(ratio, adv, c_low, c_high):
    """Positive share of the loss mass over the tokens that still carry gradient; 1.0 if there is no mass."""
    pos_keeps = (adv > 0) & (ratio <= c_high)
    neg_keeps = (adv < 0) & (ratio >= c_low)
    pos = (adv * ratio)[pos_keeps].sum()
    neg = (-adv * ratio)[neg_keeps].sum()
    total = float(pos + neg)
    return float(pos) / total if total > 0 else 1.0


def bapo_step(rho, c_low, c_high, rho0=0.4, low_max=0.9, high_max=3.0, low_step=0.02, high_step=0.05):
    """One pass of Algorithm 1's loop: the next (c_low, c_high), or the same pair if the loop stops."""
    if not (rho < rho0 and c_low + low_step <= low_max + TOL):     # the while condition
        return c_low, c_high
    if c_high + high_step <= high_max + TOL:                      # raise the upper bound first ...
        return c_low, c_high + high_step
    return c_low + low_step, c_high                              # ... then the lower one
