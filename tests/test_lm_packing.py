"""Rung 3's packed scoring (toy_rl.lm.packing): each prompt's answers end to end behind it, no padding. The layout
on a hand-made batch, and the same log-probs, entropies and gradients as the padded layout on a tiny random Llama."""
import json
import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
pytest.importorskip("transformers", reason="the llm extras are not installed (pip install 'toy_rl[llm]')")
pytest.importorskip("peft", reason="the llm extras are not installed (pip install 'toy_rl[llm]')")

import torch  # noqa: E402

from test_lm_bf16 import batch_of, policy, scored_on_and_off  # noqa: E402
from test_lm_run import spec  # noqa: E402
from toy_rl.experiments import run, status  # noqa: E402
from toy_rl.arithmetic.model.gpt import distinct_rows  # noqa: E402
from toy_rl.lm.packing import answer_lengths, pack_answers  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def _one_thread(one_thread):
    """Every test here on one torch thread (tests/conftest.py)."""


def test_a_hand_made_batch_packs_as_drawn():
    """Two prompts (one left-padded), three answers: 3, 1 and 2 tokens. Prompt A's row holds answer 0's first
    two tokens, then answer 2's first; answer 1 (one token) feeds nothing, so prompt B gets no row. Each token sees
    its own prompt and its own earlier tokens; every answer token is predicted by the prompt's last state (its
    first) or by the state of the token before it."""
    ids = torch.tensor([[0, 5, 6, 11, 12, 13],
                        [7, 8, 9, 21, 0, 0],
                        [0, 5, 6, 31, 32, 0]])
    mask = torch.tensor([[0, 1, 1, 1, 1, 1],
                         [1, 1, 1, 1, 0, 0],
                         [0, 1, 1, 1, 1, 0]])
    first, where = distinct_rows(ids[:, :3], mask[:, :3])
    assert first.tolist() == [0, 1] and where.tolist() == [0, 1, 0]
    p = pack_answers(ids, mask, 3, where, mask[first, :3].bool(), mask[first, :3].sum(1))
    assert p.ids.tolist() == [[11, 12, 31]] and p.rows.tolist() == [0]
    assert p.positions.tolist() == [[2, 3, 2]]                      # prompt A has 2 real tokens, answers restart
    P = 2
    assert p.take.tolist() == [0, P + 0, P + 1,                       # answer 0: prompt A's state, then 11, 12
                               1,                                     # answer 1: prompt B's state
                               0, P + 2]                              # answer 2: prompt A's state, then 31
    a = p.allowed[0, 0]
    assert a[:, :3].tolist() == [[False, True, True]] * 3             # the prompt, not its padding
    assert a[:, 3:].tolist() == [[True, False, False], [True, True, False], [False, False, True]]


def test_one_prompts_long_answers_take_rows_of_their_own():
    """Prompt A: four answers feeding 6, 5, 1 and 1 tokens; prompt B: one feeding 1. Rows as wide as the longest
    answer: A fills [6], [5, 1] and [1], B a row of its own, 4 x 6 slots, against 2 x 13 with one row per prompt.
    Where the prompts' answers are alike, one row each stays."""
    from toy_rl.lm.packing import layout
    fed, where = [6, 5, 1, 1, 1], [0, 0, 0, 0, 1]
    row, offset, prompt_of, width = layout(fed, where, keys=4)
    assert width == 6 and prompt_of == [0, 0, 0, 1]
    assert [row[b] for b in range(5)] == [0, 1, 1, 2, 3] and [offset[b] for b in range(5)] == [0, 0, 5, 0, 0]
    assert layout([3, 3], [0, 1], keys=4)[2:] == ([0, 1], 3)        # balanced: one row per prompt


def test_answers_with_a_gap_are_not_packed():
    mask = torch.tensor([[1, 1, 0, 1], [1, 1, 1, 0]])
    assert answer_lengths(mask, 1) is None
    assert answer_lengths(mask[1:], 1).tolist() == [2]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("seed", [0, 1])
def test_packed_scoring_gives_the_padded_numbers(dtype, seed):
    """Log-probs and entropies at every real answer token, and the adapters' gradients, match the padded layout
    up to rounding; padding reads 0. A token scored at the wrong position or seeing another answer would move
    its log-prob by a good fraction of a nat."""
    p = policy(dtype)
    b = batch_of(p, seed)
    m = b.response_mask.bool()
    assert not m.all() and len(set(m.sum(1).tolist())) > 1          # answers of different lengths
    (lp, ent, g), (lp0, ent0, g0) = scored_on_and_off(p, b, "pack_answers")
    tol = {"float32": 1e-5, "bfloat16": 0.05}[dtype]
    assert torch.allclose(lp[m], lp0[m], atol=tol) and torch.allclose(ent[m], ent0[m], atol=tol)
    assert (lp[~m] == 0).all() and (ent[~m] == 0).all()
    assert all((a - c).norm() <= tol * c.norm() for a, c in zip(g, g0))     # bf16: each ~2 % from float32's


def test_a_run_resumes_in_the_layout_it_started_in(tmp_path):
    """Packed and padded answers round apart in bf16, so a run started before packing (its config.json names no
    "answers") resumes padded, and one started packed resumes packed."""
    run(spec(where=tmp_path, rule="symmetric", steps=2))
    path = tmp_path / "config.json"
    config = json.loads(path.read_text())
    assert config["answers"] == "packed"
    del config["answers"]
    path.write_text(json.dumps(config))                  # as a run logged before packing wrote it
    longer = spec(where=tmp_path, rule="symmetric", steps=3)
    assert status(longer) == "resumed"
    run(longer)
    assert "answers" not in json.loads(path.read_text())
    again = tmp_path / "again"
    run(spec(where=again, rule="symmetric", steps=2))
    run(spec(where=again, rule="symmetric", steps=3))
    assert json.loads((again / "config.json").read_text())["answers"] == "packed"
