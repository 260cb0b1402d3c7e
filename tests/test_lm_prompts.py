"""Rung 3 without a model: prompt formats, answer extraction, the arithmetic task, GSM8K JSONL, LoRA arguments."""
import json
import random
from types import SimpleNamespace

import pytest
import torch

from toy_rl.lm.lora import add_lora, check_lora_args, default_target_modules
from toy_rl.lm.prompts import (chat_messages, extract_final_number, extract_int, few_shot_prompt, int_reward,
                               render_chat)
from toy_rl.lm.tasks import ArithmeticTask, GSM8KTask, load_gsm8k_jsonl
from toy_rl.arithmetic.tasks.base import Problem


class FakeChatTokenizer:
    """Records how apply_chat_template is called; renders a ChatML-like text."""
    chat_template = "fake"

    def __init__(self):
        self.calls = []

    def apply_chat_template(self, messages, add_generation_prompt=False, tokenize=True):
        self.calls.append((messages, add_generation_prompt, tokenize))
        text = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
        return text + ("<|im_start|>assistant\n" if add_generation_prompt else "")


# ------------------------------------------------------------------------------------- formats
def test_few_shot_prompt_is_one_example_per_line_then_the_question():
    text = few_shot_prompt([("1 + 2 =", 3), ("10 + 20 =", 30)], "4 + 5 =")
    assert text == "1 + 2 = 3\n10 + 20 = 30\n4 + 5 ="


def test_render_chat_uses_the_template_with_generation_prompt_as_text():
    tok = FakeChatTokenizer()
    text = render_chat(tok, chat_messages("4 + 5 =", examples=[("1 + 2 =", 3)], system="Be brief."))
    (messages, gen, tokenize), = tok.calls
    assert gen is True and tokenize is False
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert messages[2]["content"] == "3"
    assert text.endswith("<|im_start|>user\n4 + 5 =<|im_end|>\n<|im_start|>assistant\n")


def test_render_chat_refuses_a_plain_string_and_bad_messages():
    tok = FakeChatTokenizer()
    with pytest.raises(TypeError, match="not a string"):
        render_chat(tok, "What is 2 + 2?")
    with pytest.raises(TypeError, match="role"):
        render_chat(tok, [{"content": "hi"}])
    with pytest.raises(TypeError):
        render_chat(tok, [])
    assert tok.calls == []
    with pytest.raises(ValueError, match="no chat template"):
        render_chat(SimpleNamespace(chat_template=None), [{"role": "user", "content": "hi"}])


# ------------------------------------------------------------------------------------- answers
@pytest.mark.parametrize("completion, expected", [
    (" 85", 85), (" 85\n12 + 3 = 15", 85), (" 85<|im_end|>", 85), (" -7", -7), ("The answer is 42.", 42),
    (" 1 2", 1), ("\n85", None), ("", None), (" eighty", None), ("<|im_end|> 85", None),
])
def test_extract_int_reads_the_first_integer_of_the_first_line(completion, expected):
    assert extract_int(completion) == expected


def test_int_reward():
    assert int_reward(" 85", 85) == 1.0 and int_reward(" 85", "85") == 1.0
    assert int_reward(" 84", 85) == 0.0 and int_reward("", 85) == 0.0
    assert int_reward(" 850", 85) == 0.0


@pytest.mark.parametrize("completion, expected", [
    ("She has 3 + 4 = 7 apples.\n#### 7", 7), ("so 5, then 1,234 in all", 1234), ("#### 3.5", 3.5),
    ("#### 1,000<|im_end|>more 5", 1000), ("4 then 9<|im_end|> 11", 9), ("no number", None), ("#### none", None),
    ("#### -12", -12), ("2.0", 2),
])
def test_extract_final_number(completion, expected):
    assert extract_final_number(completion) == expected


# ------------------------------------------------------------------------------------- arithmetic task
def test_arithmetic_prompt_format_and_reward():
    task = ArithmeticTask()
    p = task.sample(1, random.Random(0))[0]
    lines = p.prompt.split("\n")
    assert len(lines) == 4 and lines[-1].endswith("=") and not p.prompt.endswith(" ")
    a, b = (int(x) for x in lines[-1][:-2].split(" + "))
    assert 10 <= a <= 99 and 10 <= b <= 99 and p.answer == str(a + b)
    for line, (q, ans) in zip(lines, task.examples):
        assert line == f"{q} {ans}" and eval(q[:-1]) == ans
    assert task.reward(p, f" {a + b}\n") == 1.0
    assert task.reward(p, f" {a + b + 1}") == 0.0
    assert task.max_answer_chars == 3 and task.max_new_tokens == 5


def test_arithmetic_heldout_is_fixed_and_disjoint_from_training():
    task = ArithmeticTask()
    held = task.heldout(200)
    assert held == ArithmeticTask().heldout(200) and len({p.prompt for p in held}) == 200
    train = task.sample(500, random.Random(3))
    assert not {p.prompt for p in train} & {p.prompt for p in task._heldout_pool}
    assert task.sample(5, random.Random(7)) == task.sample(5, random.Random(7))
    shots = {q for q, _ in task.examples}
    assert all(p.prompt.split("\n")[-1] not in shots for p in held + train)


def test_arithmetic_variants_and_chat_question():
    sub = ArithmeticTask(op="-", digits=3)
    for p in sub.sample(50, random.Random(1)):
        assert int(p.answer) >= 0 and sub.reward(p, f" {p.answer}") == 1.0
    mul = ArithmeticTask(op="*", digits=2, digits2=1)
    p = mul.sample(1, random.Random(2))[0]
    q = p.prompt.split("\n")[-1]
    assert len(q.split(" * ")[1].rstrip(" =")) == 1 and mul.max_answer_chars == 3
    chat = ArithmeticTask(prompt_format="chat")
    p = chat.sample(1, random.Random(0))[0]
    assert p.prompt.startswith("What is ") and "\n" not in p.prompt


@pytest.mark.parametrize("kwargs, match", [
    (dict(digits=0), "digits"), (dict(digits=7), "digits"), (dict(digits2=0), "digits2"), (dict(op="/"), "op"),
    (dict(shots=-1), "shots"), (dict(shots=1.5), "shots"), (dict(prompt_format="json"), "prompt_format"),
])
def test_arithmetic_task_rejects_bad_settings(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ArithmeticTask(**kwargs)


# ------------------------------------------------------------------------------------- GSM8K JSONL
def _write(path, records, extra_lines=()):
    lines = [json.dumps(r) for r in records] + list(extra_lines)
    path.write_text("\n".join(lines) + "\n")
    return path


def _gsm(n):
    return [{"question": f"Tom has {i} apples and buys 2. How many?", "answer": f"{i} + 2 = {i + 2}\n#### {i + 2:,}"}
            for i in range(n)]


def test_load_gsm8k_jsonl_reads_questions_solutions_and_final_answers(tmp_path):
    recs = _gsm(3) + [{"question": "Big?", "answer": "Lots.\n#### 1,200"}]
    data = load_gsm8k_jsonl(_write(tmp_path / "d.jsonl", recs, extra_lines=["", "   "]))
    assert len(data) == 4
    assert data[0].question == recs[0]["question"] and data[0].solution == recs[0]["answer"]
    assert [d.answer for d in data] == ["2", "3", "4", "1200"]


@pytest.mark.parametrize("line, match", [
    ("{not json", "d.jsonl:2: not valid JSON"),
    ("[1, 2]", "d.jsonl:2: expected a JSON object"),
    ('{"question": "q"}', r"d.jsonl:2: missing .*'answer'"),
    ('{"question": 3, "answer": "#### 3"}', r"d.jsonl:2: missing .*'question'"),
    ('{"question": "q", "answer": "no final line"}', "d.jsonl:2: the answer has no final line"),
    ('{"question": "q", "answer": "#### many"}', "d.jsonl:2: the answer has no final line"),
])
def test_load_gsm8k_jsonl_names_the_bad_line(tmp_path, line, match):
    with pytest.raises(ValueError, match=match):
        load_gsm8k_jsonl(_write(tmp_path / "d.jsonl", _gsm(1), extra_lines=[line]))


def test_load_gsm8k_jsonl_missing_or_empty_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="never downloads"):
        load_gsm8k_jsonl(tmp_path / "nope.jsonl")
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(ValueError, match="no records"):
        load_gsm8k_jsonl(tmp_path / "empty.jsonl")


def test_gsm8k_task_split_sample_and_reward(tmp_path):
    path = _write(tmp_path / "d.jsonl", _gsm(30))
    task = GSM8KTask(str(path), heldout_size=10)
    held = task.heldout(10)
    assert held == GSM8KTask(str(path), heldout_size=10).heldout(10)
    train = task.sample(100, random.Random(0))
    assert not {p.prompt for p in train} & {p.prompt for p in held}
    assert len({p.prompt for p in train}) == 20
    assert train == task.sample(100, random.Random(0))
    p = held[0]
    assert p.prompt.endswith(GSM8KTask.INSTRUCTION)
    assert task.reward(p, f"Adding 2.\n#### {p.answer}") == 1.0
    assert task.reward(p, f"so {p.answer}") == 1.0
    assert task.reward(p, "#### 999") == 0.0 and task.reward(p, "no idea") == 0.0
    with pytest.raises(ValueError, match="held-out size"):
        task.heldout(11)


def test_gsm8k_task_plain_shots_and_separate_heldout_file(tmp_path):
    train_path = _write(tmp_path / "train.jsonl", _gsm(12))
    test_path = _write(tmp_path / "test.jsonl", _gsm(15)[10:])          # 10, 11 overlap with training
    task = GSM8KTask(str(train_path), heldout_path=str(test_path), shots=2, prompt_format="plain")
    assert len(task.heldout(5)) == 5
    train = task.sample(200, random.Random(1))
    assert not {p.prompt.rsplit("Question:", 1)[1] for p in train} & \
        {p.prompt.rsplit("Question:", 1)[1] for p in task.heldout(5)}
    p = train[0]
    assert p.prompt.count("Question:") == 3 and p.prompt.endswith("\nAnswer:")
    assert "\nAnswer: 2\n" in p.prompt                                  # shots show only the final number
    assert task.reward(p, f" {p.answer}") == 1.0


def test_gsm8k_task_errors(tmp_path):
    with pytest.raises(FileNotFoundError):
        GSM8KTask(str(tmp_path / "missing.jsonl"))
    path = _write(tmp_path / "d.jsonl", _gsm(5))
    with pytest.raises(ValueError, match="too few"):
        GSM8KTask(str(path), heldout_size=5)
    with pytest.raises(ValueError, match="prompt_format"):
        GSM8KTask(str(path), heldout_size=2, prompt_format="xml")


# ------------------------------------------------------------------------------------- LoRA arguments
class TinyNet(torch.nn.Module):
    def __init__(self, model_type="llama"):
        super().__init__()
        self.config = SimpleNamespace(model_type=model_type)
        self.q_proj, self.v_proj, self.up_proj = (torch.nn.Linear(4, 4) for _ in range(3))


@pytest.mark.parametrize("kwargs, match", [
    (dict(rank=0), "rank"), (dict(rank=2.5), "rank"), (dict(rank=True), "rank"),
    (dict(alpha=0), "alpha"), (dict(alpha=-1.0), "alpha"), (dict(alpha="32"), "alpha"),
    (dict(dropout=1.0), "dropout"), (dict(dropout=-0.1), "dropout"),
])
def test_lora_argument_errors(kwargs, match):
    args = dict(rank=16, alpha=32, dropout=0.0) | kwargs
    with pytest.raises(ValueError, match=match):
        check_lora_args(**args)
    with pytest.raises(ValueError, match=match):
        add_lora(TinyNet(), **kwargs)


def test_lora_target_modules():
    assert default_target_modules(TinyNet()) == ["q_proj", "k_proj", "v_proj", "o_proj"]
    assert default_target_modules(TinyNet("qwen2"), mlp=True)[-3:] == ["gate_proj", "up_proj", "down_proj"]
    with pytest.raises(ValueError, match=r"model_type 'gpt2'.*q_proj"):
        default_target_modules(TinyNet("gpt2"))
    with pytest.raises(ValueError, match=r"\['k_proj'\] are not linear layers"):
        add_lora(TinyNet(), target_modules=["q_proj", "k_proj"])
    with pytest.raises(ValueError, match="non-empty list"):
        add_lora(TinyNet(), target_modules="q_proj")
    with pytest.raises(ValueError, match="non-empty list"):
        add_lora(TinyNet(), target_modules=[])


def test_problem_is_the_shared_type():
    assert isinstance(ArithmeticTask().heldout(1)[0], Problem)
