"""Rung 3's long-failure task (toy_rl.lm.tasks.SearchTask): prompt, reward by hand, the registry, bad input."""
import random

import pytest

from toy_rl.experiments.tasks import make_task, task_label, task_names
from toy_rl.lm.tasks import SearchTask


def test_prompt_is_few_shot_lines_then_the_question():
    task = make_task("lm", "search")
    assert isinstance(task, SearchTask) and task_label("lm", task) == "search" and "search" in task_names("lm")
    p = task.heldout(1)[0]
    *shots, question = p.prompt.split("\n")
    assert len(shots) == task.shots and question.startswith(f"sum {p.answer} from ") and question.endswith(":")
    for line in shots:                                    # each worked example ends at a right try
        q, trace = line.split(": ")
        assert task.reward(type(p)(q + "\n" + q, q.split()[1]), " " + trace) == 1.0
    assert all(q not in (s.split(": ")[0] for s in shots) for q in (x.prompt.rsplit("\n", 1)[-1]
                                                                     for x in task.sample(50, random.Random(0))))


@pytest.mark.parametrize("completion, reward", [
    (" 1+2=3 {hit}", 1.0),                     # misses, then the hit
    (" {hit}\n{hit}", 1.0),                    # only the first line counts
    (" {hit} 1+1=2", 0.0),                     # stopped on a miss
    (" 1+2=3\n{hit}", 0.0),                    # the hit after the newline is not part of the answer
    (" {hit}<|im_end|>", 1.0),
    ("", 0.0),
])
def test_reward_reads_the_last_try_of_the_first_line(completion, reward):
    task = make_task("lm", "search")
    p = task.heldout(1)[0]
    hit = task.supervised_target(p).split()[-1]
    assert task.reward(p, completion.format(hit=hit)) == reward


def test_bad_settings_are_one_line_errors():
    with pytest.raises(ValueError, match="plain few-shot"):
        SearchTask(prompt_format="chat")
    with pytest.raises(ValueError, match="max_new_tokens"):
        SearchTask(max_new_tokens=4)
    with pytest.raises(ValueError, match="n_numbers"):
        SearchTask(n_numbers=2)
    with pytest.raises(ValueError, match="unknown task 'serch'.*search"):
        make_task("lm", "serch")


def test_add_cot_asks_for_reasoning_in_a_chat_and_reads_the_final_number():
    from toy_rl.lm.run import rl_defaults
    task = make_task("lm", "add-cot")
    p = task.heldout(1)[0]
    assert task_label("lm", task) == "add-cot" and task_label("lm", make_task("lm", "add")) == "add"
    assert task.prompt_format == "chat" and p.prompt.endswith("Think step by step, then write the final answer as "
                                                              "'#### <number>'.")
    assert rl_defaults(task) == {"max_new_tokens": 128, "temperature": 0.6}     # the task's budget and temperature
    assert "temperature" not in rl_defaults(make_task("lm", "add"))
    right, wrong = p.answer, str(int(p.answer) + 1)
    assert task.reward(p, f"First 4 + 2 ... so the sum is {wrong}.\n#### {right}") == 1.0   # after the last ####
    assert task.reward(p, f"#### {right}\nWait, no: #### {wrong}") == 0.0
    assert task.reward(p, f"The answer is {right}.") == 1.0                                # else the last number
    assert task.reward(p, f"The answer is {right}.<|im_end|> and then {wrong}") == 1.0     # the reply ends at im_end
    assert task.reward(p, "I do not know.") == 0.0
    with pytest.raises(ValueError, match="prompt_format='chat'"):
        make_task("lm", "add-cot", prompt_format="plain")
