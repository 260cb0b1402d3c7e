"""Prompt formats for a pretrained LM, and reading its answer back.

Two formats:

* **plain few-shot** (the default for SmolLM2-135M): worked examples, then the
  question, one per line::

      12 + 45 = 57
      83 + 9 = 92
      30 + 61 = 91
      47 + 38 =

  The model continues with `` 85`` and then a newline (it never writes
  end-of-text here: it would go on with the next example), so generation stops
  at the newline. Measured on SmolLM2-135M: 2-digit addition ~0.25 greedy.

* **chat**: the tokenizer's own chat template, rendered with
  ``tokenizer.apply_chat_template(messages, add_generation_prompt=True,
  tokenize=False)``. ``messages`` must be a list of ``{"role", "content"}``
  dicts: a plain string where a chat is expected is read as a sequence of
  one-character messages and silently breaks the template, so
  :func:`render_chat` refuses it. SmolLM2's template also injects a default
  system prompt, and the small model tends to repeat the question
  ("47 + 38 = 85"), so "first integer in the reply" scores near 0 for it;
  instruct models at rung 4 do better with chat.

Answers: :func:`extract_int` reads the first integer of the completion's first
line (stopping at a newline or ``<|im_end|>``); :func:`int_reward` is 1.0 when
it equals the reference, else 0.0.
"""
from __future__ import annotations

import re

IM_END = "<|im_end|>"
_INT = re.compile(r"-?\d+")
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


def few_shot_prompt(examples, question: str) -> str:
    """``examples`` are (question, answer) pairs; each becomes one line ``question answer``, then the
    question alone: ``"12 + 45 = 57\\n...\\n47 + 38 ="``. No trailing space: the model writes it."""
    lines = [f"{q} {a}" for q, a in examples]
    return "\n".join(lines + [question])


def chat_messages(question: str, examples=(), system: str | None = None) -> list[dict]:
    """A chat: optional system turn, then each example as a user/assistant pair, then the question."""
    msgs = [{"role": "system", "content": system}] if system is not None else []
    for q, a in examples:
        msgs += [{"role": "user", "content": q}, {"role": "assistant", "content": str(a)}]
    return msgs + [{"role": "user", "content": question}]


def render_chat(tokenizer, messages) -> str:
    """The prompt text for ``messages`` under the tokenizer's chat template, ending where the
    assistant's reply starts (``add_generation_prompt=True``). Refuses a plain string."""
    if isinstance(messages, str):
        raise TypeError("render_chat needs a list of {'role': ..., 'content': ...} dicts, not a string: "
                        "a plain string passed as a chat silently breaks the template; wrap it as "
                        "[{'role': 'user', 'content': text}] (see chat_messages)")
    messages = list(messages)
    if not messages or not all(isinstance(m, dict) and {"role", "content"} <= m.keys() for m in messages):
        raise TypeError(f"messages must be a non-empty list of {{'role', 'content'}} dicts; got {messages!r}")
    if getattr(tokenizer, "chat_template", None) is None:
        raise ValueError("this tokenizer has no chat template; use the plain few-shot format")
    return tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)


def first_line(completion: str) -> str:
    """The completion up to its first newline or ``<|im_end|>``."""
    return completion.split(IM_END, 1)[0].split("\n", 1)[0]


def extract_int(completion: str) -> int | None:
    """First integer of the completion's first line: ``" 85\\n12 + 3"`` -> 85; none -> None."""
    m = _INT.search(first_line(completion))
    return int(m.group()) if m else None


def int_reward(completion: str, answer) -> float:
    """1.0 if the first integer of the completion equals ``answer`` (int or its text), else 0.0."""
    got = extract_int(completion)
    return float(got is not None and got == int(answer))


def _as_number(text: str):
    text = text.replace(",", "").strip()
    try:
        value = float(text)
    except ValueError:
        return None
    return int(value) if value.is_integer() else value


def extract_final_number(completion: str):
    """A worked answer's final number (GSM8K style): the number after the last ``####`` if there
    is one, else the last number in the text (commas allowed: ``1,234``); None if there is none.
    Reads up to ``<|im_end|>``, across lines (reasoning takes several)."""
    text = completion.split(IM_END, 1)[0]
    if "####" in text:
        m = _NUMBER.search(text.rsplit("####", 1)[1])
        return _as_number(m.group()) if m else None
    found = _NUMBER.findall(text)
    return _as_number(found[-1]) if found else None
