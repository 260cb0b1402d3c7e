"""Rung 2 tasks: rewards checked by hand, held-out sets fixed and disjoint from training, the tokenizer."""
import random

import pytest

from toy_rl.arithmetic.model.tokenizer import BOS_ID, EOS_ID, PAD_ID, VOCAB_SIZE, decode, encode, encode_prompts
from toy_rl.arithmetic.tasks import TASKS, Problem, get_task
from toy_rl.arithmetic.tasks.countdown import solve
from toy_rl.arithmetic.tasks.expression import evaluate
from toy_rl.arithmetic.tasks.scratchpad import worked_sum
from toy_rl.arithmetic.tasks.search import SearchTask, parse_prompt

ALL_TASKS = sorted(set(TASKS) | {"search"})       # "search" until the registry lists it


def _task(name):
    return SearchTask() if name == "search" and name not in TASKS else get_task(name)


def test_get_task_lists_names_for_an_unknown_task():
    assert {"add", "countdown", "scratchpad"} <= set(TASKS)
    with pytest.raises(ValueError, match="add, countdown, scratchpad"):
        get_task("multiply")
    with pytest.raises(ValueError, match="bad settings"):
        get_task("add", colour="red")


def test_add_reward_by_hand():
    task = get_task("add")
    p = Problem("123-456=", "-333")
    assert task.reward(p, "-333") == 1.0
    assert task.reward(p, " -333 ") == 1.0
    assert task.reward(p, "-0333") == 1.0             # the same integer
    assert task.reward(p, "333") == 0.0
    for bad in ["", "-", "-33 3", "-333-", "abc", "-333.0", "1" * 40]:
        assert task.reward(p, bad) == 0.0, bad
    assert task.reward(Problem("999+999=", "1998"), "1998") == 1.0


def test_countdown_reward_by_hand():
    task = get_task("countdown")
    p = Problem("make 24 from 3 5 8:", "24")
    assert task.reward(p, "3*8") == 1.0
    assert task.reward(p, "8*3") == 1.0
    assert task.reward(p, " ( 3 * 8 ) ") == 1.0
    assert task.reward(p, "3*8=25") == 1.0            # only the expression counts
    assert task.reward(p, "(8-5)*8") == 0.0           # 8 used twice, given once
    assert task.reward(p, "3*8*1") == 0.0             # 1 is not given
    assert task.reward(p, "3+5+8") == 0.0             # wrong value
    for bad in ["", "3 x 8", "3**8", "(3*8", "3*8)", "-3*-8", "24/1", "3*", "eval(24)"]:
        assert task.reward(p, bad) == 0.0, bad
    assert task.reward(Problem("make 16 from 8 8 3:", "16"), "8+8") == 1.0   # given twice: may use twice


def test_expression_evaluator_precedence_and_errors():
    assert evaluate("2+3*4") == (14, [2, 3, 4])
    assert evaluate("(2+3)*4") == (20, [2, 3, 4])
    assert evaluate("9-3-2") == (4, [9, 3, 2])
    assert evaluate("9-(3-2)") == (8, [9, 3, 2])
    for bad in ["", "(", "2+", "2 3", "2/3", "-2", "()", "(" * 40 + "1" + ")" * 40]:
        with pytest.raises(ValueError):
            evaluate(bad)


def test_countdown_search_finds_a_valid_solution():
    task = get_task("countdown")
    for p in task.sample(200, rng=1):
        assert task.reward(p, task.supervised_target(p)) == 1.0
    assert solve((3, 5, 8), 24) is not None
    assert solve((1, 1), 100) is None


def test_scratchpad_format_and_reward():
    task = get_task("scratchpad")
    assert worked_sum(4567, 891) == "7+1+0=8 6+9+0=15 5+8+1=14 4+0+1=5 =5458"
    p = Problem("4567+891:", "5458")
    assert task.supervised_target(p) == worked_sum(4567, 891)
    assert task.reward(p, worked_sum(4567, 891)) == 1.0
    assert task.reward(p, "garbage steps =5458") == 1.0             # only the final result is checked
    assert task.reward(p, "7+1+0=8 6+9+0=15 5+8+1=14 4+0+1=5 =5459") == 0.0
    assert task.reward(p, "7+1+0=8 6+9+0=15") == 0.0                # stopped early
    assert task.reward(p, "") == 0.0
    targets = [task.supervised_target(q) for q in task.sample(100, rng=2)]
    assert min(len(encode(t)) for t in targets) >= 16
    assert max(len(t) for t in targets) <= task.max_answer_chars


def test_search_reward_by_hand():
    task = SearchTask()
    p = Problem("sum 11 from 7 4 9 3 5 8 2 6:", "11")
    assert parse_prompt(p.prompt) == ((7, 4, 9, 3, 5, 8, 2, 6), 11)
    for right in ["3+8=11", "8+3=11", "9+2=11", " 5+6=11 ", "7+9=16 3+8=11", "1+1=5 4+7=11"]:
        assert task.reward(p, right) == 1.0, right
    for wrong in ["", "3+8=12", "3+8=1", "1+10=11", "7+9=16 4+5=9", "3+8=11 7+9=16", "3+8", "3*8=11",
                  "5+6=11x", "3+8=11=11"]:
        assert task.reward(p, wrong) == 0.0, wrong
    assert task.reward(Problem("sum 10 from 5 1 2 3 4 6 7 8:", "10"), "5+5=10") == 0.0      # 5 is given once
    assert task.reward(Problem("sum 10 from 5 5 2 3 4 6 7 8:", "10"), "5+5=10") == 1.0
    with pytest.raises(ValueError, match="p_first"):
        SearchTask(p_first=0.0)
    with pytest.raises(ValueError, match="n_numbers"):
        SearchTask(n_numbers=2)


def test_search_trace_tries_misses_then_the_hit():
    task = SearchTask()
    problems = task.sample(400, rng=5)
    traces = [task.supervised_target(p) for p in problems]
    assert traces == [task.supervised_target(p) for p in problems]          # seeded by the prompt
    tries = [t.split() for t in traces]
    for p, t in zip(problems, tries):
        numbers, target = parse_prompt(p.prompt)
        sums = [eval(x.split("=")[0]) for x in t]                            # digits and '+' only
        assert sums[-1] == target and all(s != target for s in sums[:-1])
        assert all(int(x.split("=")[1]) == s for x, s in zip(t, sums))      # every sum written right
    n = [len(t) for t in tries]
    assert max(n) <= task.max_wrong + 1
    assert 0.4 < sum(k == 1 for k in n) / len(n) < 0.6                       # the hit first with p_first = 0.5
    assert len(SearchTask(p_first=1.0).supervised_target(problems[0]).split()) == 1


@pytest.mark.parametrize("name", ALL_TASKS)
def test_heldout_is_deterministic_and_disjoint_from_training(name):
    task = _task(name)
    held = task.heldout(300)
    assert held == _task(name).heldout(300)                       # same list every time
    assert len({p.prompt for p in held}) == 300
    assert task.heldout(10) == held[:10]
    pool = {p.prompt for p in task.heldout(1000)}
    train = task.sample(3000, rng=random.Random(0))
    assert not pool & {p.prompt for p in train}
    assert train == task.sample(3000, rng=0)                         # int seed == Random(seed)
    with pytest.raises(ValueError):
        task.heldout(10 ** 6)


@pytest.mark.parametrize("name", ALL_TASKS)
def test_targets_are_rewarded_and_fit(name):
    task = _task(name)
    for p in task.sample(50, rng=3) + task.heldout(50):
        target = task.supervised_target(p)
        assert task.reward(p, target) == 1.0
        assert len(target) <= task.max_answer_chars
        assert 0.0 <= task.reward(p, target[:-1]) <= 1.0
        encode(p.prompt + target)                                    # every character is in the vocabulary


def test_tokenizer_round_trip_and_errors():
    text = "make 24 from 3 5 8:(3+5)*8-0 =15201"
    assert decode(encode(text)) == text
    assert decode(encode("12") + [EOS_ID] + encode("34")) == "12"         # stops at EOS
    assert decode([PAD_ID, BOS_ID] + encode("7") + [PAD_ID]) == "7"       # skips PAD and BOS
    assert len(set(encode("0123456789+-*= "))) == 15
    assert VOCAB_SIZE < 64
    with pytest.raises(ValueError, match="'#'"):
        encode("12#3")
    with pytest.raises(ValueError, match="outside"):
        decode([VOCAB_SIZE + 3])


def test_encode_prompts_left_pads_with_bos():
    ids, mask = encode_prompts(["1+2=", "123+456="])
    assert ids.shape == mask.shape == (2, 9)
    assert ids[0, :4].tolist() == [PAD_ID] * 4 and mask[0].tolist() == [0] * 4 + [1] * 5
    assert ids[0, 4] == BOS_ID and ids[1, 0] == BOS_ID
    assert decode(ids[0]) == "1+2="
