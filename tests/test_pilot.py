"""The shared pilot gate on the RL loop's records (toy_rl.experiments.pilot): the regime it names, by hand."""
import json
import math

import pytest
import torch

from toy_rl.clipping import BAPO, policy_loss
from toy_rl.experiments.pilot import records_array, summarise_records
from toy_rl.rl.diagnostics import balance_at_start


def _record(step, right_len, wrong_len, rule=BAPO()):
    """One on-policy update of a group of 2 right and 2 wrong answers of the given lengths, as the loop logs it."""
    T = max(right_len, wrong_len)
    mask = torch.zeros(4, T)
    mask[:2, :right_len] = 1
    mask[2:, :wrong_len] = 1
    adv = torch.tensor([1.0, 1.0, -1.0, -1.0])[:, None].expand(4, T)
    logp = torch.full((4, T), -1.0)
    _, stats = policy_loss(logp, logp.clone(), adv, mask, rule)
    stats.update(balance_at_start(torch.ones(4, T), adv, mask))
    return {"step": step, **stats}


def test_long_failures_dominate_and_equal_lengths_are_balanced():
    long_fail = [[_record(s, 4, 8) for s in range(6)]]               # λ = 2: on-policy ρ = 1/3 < 0.4
    s = summarise_records(long_fail)
    assert s["regime"] == "negatives-dominate" and s["rho_below_target_frac"] == 1.0
    assert s["lambda"]["q50"] == pytest.approx(2.0)
    assert s["rho_before"]["q50"] == pytest.approx(1 / 3) and s["rho_start"]["all"]["q50"] == pytest.approx(1 / 3)
    assert s["search_moved_frac"] == 1.0 and s["c_high_mean"] == pytest.approx(3.0)   # r ≡ 1: runs to its caps
    equal = [[_record(s, 4, 4) for s in range(6)]]                   # λ = 1: ρ = 0.5
    b = summarise_records(equal, equal)
    assert b["regime"] == "balanced" and b["search_moved_frac"] == 0.0 and b["c_high_mean"] == pytest.approx(1.2)
    assert b["symmetric"]["lambda"]["mean"] == pytest.approx(1.0)


def test_seeds_with_fewer_updates_count_only_their_real_updates():
    # partial rollout: seeds make different numbers of updates; records_array pads the shorter with NaN
    runs = [[_record(s, 4, 8) for s in range(6)], [_record(s, 4, 8) for s in range(2)]]    # 8 updates, all moved
    s = summarise_records(runs)
    assert s["updates"] == 8 and s["search_moved_frac"] == 1.0 and s["rho_defined_frac"] == 1.0
    assert s["search_moved_frac_early"] == 1.0 and s["search_moved_frac_late"] == 1.0
    mixed = summarise_records([[_record(s, 4, 8) for s in range(6)], [_record(s, 4, 4) for s in range(2)]])
    assert mixed["search_moved_frac"] == pytest.approx(6 / 8)                       # not 6 / 12


def test_records_array_pads_seeds_and_skips_evaluation_and_final_records():
    runs = [[{"step": 0, "accuracy": 0.5}, {"step": 0, "c_low": 0.6, "rho_before": 0.3}, {"final": True, "c_low": 9}],
            [{"step": 0, "c_low": 0.6, "rho_before": None}, {"step": 1, "c_low": 0.6, "rho_before": 0.5}]]
    a = records_array(runs, "rho_before")
    assert a.shape == (2, 2) and a[0, 0] == 0.3 and math.isnan(a[0, 1]) and math.isnan(a[1, 0]) and a[1, 1] == 0.5



def test_cli_pilot_rung1_default_preset_dominates_and_control_is_balanced(capsys):
    from toy_rl.cli import main
    assert main(["pilot", "--rung", "1", "--json", "--seeds", "4", "--steps", "80"]) == 0
    p = json.loads(capsys.readouterr().out)
    assert p["regime"] == "negatives-dominate" and p["preset"] == "long-failures"
    assert p["search_moved_frac"] >= 0.5 and p["c_high_mean"] >= 1.5
    assert main(["pilot", "--rung", "1", "--preset", "balanced", "--json", "--seeds", "4", "--steps", "80"]) == 0
    assert json.loads(capsys.readouterr().out)["regime"] == "balanced"
