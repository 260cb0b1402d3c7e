"""toy_rl.lm.length_probe: λ and ρ of a sampled GRPO batch at several answer budgets (tiny random Llama)."""
import pytest

pytest.importorskip("peft", reason="the llm extras are not installed (pip install 'toy_rl[llm]')")

import torch  # noqa: E402
from test_lm_run import tiny_llama  # noqa: E402

from toy_rl.lm import ArithmeticTask  # noqa: E402
from toy_rl.lm.length_probe import budget_row, probe  # noqa: E402


def test_lambda_is_the_wrong_over_right_length_when_groups_are_half_right():
    rewards = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    lengths = torch.tensor([[2, 4], [6, 3]])
    row = budget_row(rewards, lengths, 8)
    assert row["accuracy"] == 0.5 and row["len_right"] == 2.5 and row["len_wrong"] == 5.0
    assert row["lambda_mass"] == pytest.approx(10 / 5) and row["rho"] == pytest.approx(1 / 3)
    assert row["mixed_groups"] == 2


def test_groups_without_a_right_answer_carry_nothing():
    row = budget_row(torch.tensor([[1.0, 0.0], [0.0, 0.0]]), torch.tensor([[2, 4], [50, 50]]), 50)
    assert row["lambda_mass"] == pytest.approx(2.0) and row["mixed_groups"] == 1 and row["len_wrong"] == pytest.approx(104 / 3)


def test_probe_reads_one_sample_at_every_budget(one_thread):
    out = probe(ArithmeticTask(), prompts=2, group=3, budgets=(4, 2), model=tiny_llama)
    assert [r["budget"] for r in out["rows"]] == [2, 4] and out["temperature"] == 1.0
    assert all(r["groups"] == 2 and (r["len_wrong"] is None or r["len_wrong"] <= r["budget"]) for r in out["rows"])


@pytest.mark.parametrize("kw", [dict(prompts=0), dict(group=1), dict(budgets=()), dict(budgets=(0, 4))])
def test_bad_settings_are_refused(kw):
    with pytest.raises(ValueError):
        probe(ArithmeticTask(), model=tiny_llama, **{"prompts": 2, "group": 2, **kw})
