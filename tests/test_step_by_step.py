"""The learner's file of rungs 2-4 (toy_rl/arithmetic/step_by_step.py) computes what the library's update computes."""
import pytest
import torch

from toy_rl.arithmetic.model.gpt import GPT, ModelConfig
from toy_rl.arithmetic.policy import TinyPolicy
from toy_rl.arithmetic.tasks import get_task
from toy_rl.arithmetic.step_by_step import one_update


class VariedReward:
    """Rung 2's "add" with a reward a random GPT earns half the time (the answer's first character's code is
    even), so that groups carry non-zero advantages."""
    def __init__(self):
        self.task = get_task("add")
        self.max_answer_chars = self.task.max_answer_chars

    def sample(self, n, rng):
        return self.task.sample(n, rng)

    def reward(self, problem, text):
        return float(bool(text) and ord(text[0]) % 2 == 0)


@pytest.mark.parametrize("rule", ["symmetric", "clip-higher", "bapo"])
@pytest.mark.parametrize("staleness", [0, 2])
def test_the_step_written_out_gives_the_library_loss(rule, staleness):
    torch.manual_seed(0)
    policy = TinyPolicy(GPT(ModelConfig(n_layer=1, n_head=2, d_model=32, block_size=32)))
    out = one_update(policy, VariedReward(), rule, staleness, prompts=3, group_size=6, lr=3e-2, verbose=False)
    assert 0 < out["reward_mean"] < 1
    assert out["loss"] != 0
    assert out["loss"] == pytest.approx(out["library_loss"], rel=1e-5, abs=1e-7)
    assert out["c_low"] < 1 < out["c_high"]


def test_the_command_runs_one_update_on_the_tiny_warm_start(capsys):
    from toy_rl.arithmetic.step_by_step import main
    assert main(["--smoke", "--rule", "clip-higher", "--staleness", "1"]) == 0
    printed = capsys.readouterr().out
    assert "clip-higher: bounds [0.800, 1.280]" in printed and "toy_rl.rl.loop.update" in printed
