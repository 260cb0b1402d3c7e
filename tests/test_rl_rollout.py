"""Rollout pool, batch layout, advantages and the metrics log — no model needed."""
import json
from types import SimpleNamespace

import pytest
import torch

from toy_rl.advantages import group_advantages
from toy_rl.rl.logbook import Logbook
from toy_rl.rl.rollout import RolloutPool, make_batch

EOS = 0
PROMPT = 50        # prompt token ids are >= 50


class CountingPolicy:
    """Writes tokens 1, 2, 3, ... and stops (EOS) after `length` tokens; log-prob = -token/10."""

    def __init__(self, length):
        self.length = length
        self.calls = []

    def sample(self, prompts, max_new_tokens, temperature, generator):
        self.calls.append(max_new_tokens)
        out = []
        for p in prompts:
            done_so_far = sum(t < PROMPT for t in p)         # its own tokens so far
            toks = list(range(done_so_far + 1, self.length + 1))[:max_new_tokens]
            finished = done_so_far + len(toks) >= self.length
            if finished:
                toks = toks[:-1] + [EOS]
            out.append((toks, [-t / 10 for t in toks], finished))
        return out


def test_group_advantages_by_hand():
    r = torch.tensor([[1.0, 0.0, 0.0, 1.0], [1.0, 1.0, 1.0, 1.0]])
    a = group_advantages(r)
    std = torch.tensor([1.0, 0, 0, 1]).std().item()          # unbiased, 0.5774
    assert torch.allclose(a[0], torch.tensor([0.5, -0.5, -0.5, 0.5]) / (std + 1e-6))
    assert torch.all(a[1] == 0)                               # all equal: no signal
    assert torch.allclose(group_advantages(r, "drgrpo")[0], torch.tensor([0.5, -0.5, -0.5, 0.5]))
    with pytest.raises(ValueError, match="G >= 2"):
        group_advantages(torch.ones(3, 1))


def test_partial_rollout_resumes_and_records_versions():
    pool = RolloutPool(group_size=2, max_new_tokens=10, budget=2)
    pool.add([SimpleNamespace(prompt="x")], encode=lambda s: [PROMPT])
    policy = CountingPolicy(length=5)
    for version in range(3):                                  # 2 + 2 + 1 tokens
        pool.generate(policy, version)
    (group,) = pool.pop_finished()
    a = group.answers[0]
    assert a.tokens == [1, 2, 3, 4, EOS]
    assert a.version == [0, 0, 1, 1, 2]                       # one answer, three policy versions
    assert a.logp == [-0.1, -0.2, -0.3, -0.4, 0.0]
    assert policy.calls == [2, 2, 2] and pool.groups == []


def test_answers_stop_at_max_new_tokens():
    pool = RolloutPool(group_size=2, max_new_tokens=3)
    pool.add([SimpleNamespace(prompt="x")], encode=lambda s: [PROMPT])
    pool.generate(CountingPolicy(length=9), 0)
    (group,) = pool.pop_finished()
    assert [len(a.tokens) for a in group.answers] == [3, 3]


def test_make_batch_layout_left_pads_prompts_and_right_pads_answers():
    pool = RolloutPool(group_size=2, max_new_tokens=10)
    pool.add([SimpleNamespace(prompt="ab"), SimpleNamespace(prompt="abcd")], encode=lambda s: [PROMPT] * len(s))
    pool.generate(CountingPolicy(length=3), 4)
    groups = pool.pop_finished()
    b = make_batch(groups, reward_fn=lambda prob, text: float(len(prob.prompt) == 2), decode=str, pad_id=9)
    assert b.start == 4 and b.input_ids.shape == (4, 4 + 3)
    assert b.input_ids[0].tolist() == [9, 9, PROMPT, PROMPT, 1, 2, EOS]
    assert b.attention_mask[0].tolist() == [0, 0, 1, 1, 1, 1, 1]
    assert b.response_mask.tolist() == [[1, 1, 1]] * 4
    assert torch.all(b.version == 4)
    assert b.rewards.tolist() == [1, 1, 0, 0] and torch.all(b.advantages == 0)   # equal within groups


def test_bad_pool_arguments():
    with pytest.raises(ValueError, match="group_size"):
        RolloutPool(group_size=1, max_new_tokens=4)
    with pytest.raises(ValueError, match="budget"):
        RolloutPool(group_size=2, max_new_tokens=4, budget=0)


def test_logbook_resume_keeps_lines_up_to_the_checkpoint(tmp_path):
    log = Logbook(tmp_path / "m.jsonl")
    for step in range(5):
        log.write({"step": step, "x": float("nan") if step == 1 else step})
    assert json.loads((tmp_path / "m.jsonl").read_text().splitlines()[1])["x"] is None
    resumed = Logbook(tmp_path / "m.jsonl", resume_after=2)
    assert [r["step"] for r in resumed.read()] == [0, 1, 2]


def test_checkpoints_that_name_problem_by_its_old_module_still_load(tmp_path, monkeypatch):
    """Problem moved from toy_rl.arithmetic.tasks.base (still importable there) to toy_rl.rl.tasks: a checkpoint
    that names the old path, as a plain value or pickled, reads back as the same class."""
    from toy_rl.arithmetic.tasks.base import Problem as OldPath
    from toy_rl.rl.rollout import legacy_classes, problem_from_plain, problem_to_plain
    from toy_rl.rl.run_folder import load_state
    from toy_rl.rl.tasks import Problem
    assert OldPath is Problem
    p = Problem("47+28=", "75")
    assert problem_to_plain(p)["class"] == "toy_rl.rl.tasks.Problem"
    assert problem_from_plain({"class": "toy_rl.arithmetic.tasks.base.Problem", "fields": vars(p)}) == p
    monkeypatch.setattr(Problem, "__module__", "toy_rl.arithmetic.tasks.base")
    torch.save({"queue": [p]}, tmp_path / "old.pt")                  # as toy_rl pickled it before
    monkeypatch.undo()
    assert load_state(tmp_path / "old.pt", classes=legacy_classes()) == {"queue": [p]}
