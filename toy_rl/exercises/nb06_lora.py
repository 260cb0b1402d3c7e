"""Exercises of notebook 06 (LoRA on a real LM): the forward pass of a LoRA-adapted linear layer, checked against
peft's own layer, and the reward read from the model's text, checked against the task's reward."""
from __future__ import annotations

import math
import re

import torch

from . import register
from .framework import Case, Exercise, Mistake, close

NB = "06_lora_real_lm"
F64 = torch.float64


# ----------------------------------------------------------------------------- the LoRA forward

def _lora_cases():
    g = torch.Generator().manual_seed(601)
    R = lambda *shape: torch.randn(*shape, generator=g, dtype=F64)       # noqa: E731
    x, W, A = R(3, 6), R(4, 6), R(2, 6)
    cases = [
        Case("a fresh adapter: B = 0", (x, W, A, torch.zeros(4, 2, dtype=F64), 32.0, 2),
             note="peft starts B at zero, so the adapted layer starts exactly equal to the pretrained one"),
        Case("notebook 06's scale: r = 16, alpha = 32", (R(2, 20), R(5, 20), R(16, 20), R(5, 16), 32.0, 16)),
        Case("rank 1", (x, W, R(1, 6), R(4, 1), 4.0, 1)),
        Case("alpha = 8, r = 4", (R(3, 5), R(7, 5), R(4, 5), R(7, 4), 8.0, 4)),
        Case("alpha smaller than r", (R(3, 5), R(2, 5), R(4, 5), R(2, 4), 1.0, 4)),
        Case("a batch of sequences: x is (batch, tokens, in)", (R(2, 3, 6), W, R(2, 6), R(4, 2), 16.0, 2),
             note="a linear layer acts on the last axis; every leading axis is a batch axis"),
    ]
    for i in range(6):
        n_in, n_out = int(torch.randint(2, 12, (1,), generator=g)), int(torch.randint(2, 12, (1,), generator=g))
        r = int(torch.randint(1, 9, (1,), generator=g))
        alpha = float((1, 8, 16, 32)[i % 4])
        cases.append(Case(f"random layer #{i + 1} ({n_in} -> {n_out}, r = {r}, alpha = {alpha:g})",
                          (R(4, n_in), R(n_out, n_in), R(r, n_in), R(n_out, r), alpha, r), random=True))
    return cases


def _scale_alpha(x, W, A, B, alpha, r):
    return x @ W.T + alpha * (x @ A.T @ B.T)


def _no_scale(x, W, A, B, alpha, r):
    return x @ W.T + x @ A.T @ B.T


def _rslora(x, W, A, B, alpha, r):
    return x @ W.T + alpha / math.sqrt(r) * (x @ A.T @ B.T)


def _r_over_alpha(x, W, A, B, alpha, r):
    return x @ W.T + r / alpha * (x @ A.T @ B.T)


def _update_only(x, W, A, B, alpha, r):
    return alpha / r * (x @ A.T @ B.T)


def _like_peft(fn):
    """The same weights in peft's own LoRA layer (get_peft_model on a one-layer module)."""
    try:
        from peft import LoraConfig, get_peft_model
    except ImportError:
        return True, ("note: peft is not installed here, so your layer was checked against the formula only, not "
                      "against peft's LoRA layer (install it with `bash scripts/setup.sh dev,llm`)")

    class OneLayer(torch.nn.Module):
        def __init__(self, n_in, n_out):
            super().__init__()
            self.proj = torch.nn.Linear(n_in, n_out, bias=False)

        def forward(self, x):
            return self.proj(x)

    g = torch.Generator().manual_seed(606)
    for n_in, n_out, r, alpha in ((6, 4, 2, 4.0), (20, 12, 16, 32.0), (8, 8, 3, 5.0)):
        W = torch.randn(n_out, n_in, generator=g, dtype=F64)
        A = torch.randn(r, n_in, generator=g, dtype=F64)
        B = torch.randn(n_out, r, generator=g, dtype=F64)
        x = torch.randn(2, 3, n_in, generator=g, dtype=F64)
        base = OneLayer(n_in, n_out).double()
        with torch.no_grad():
            base.proj.weight.copy_(W)
        model = get_peft_model(base, LoraConfig(r=r, lora_alpha=alpha, target_modules=["proj"], lora_dropout=0.0))
        layer = model.base_model.model.proj
        with torch.no_grad():
            layer.lora_A["default"].weight.copy_(A)
            layer.lora_B["default"].weight.copy_(B)
            expected = model.eval()(x)
        ok, detail = close(rtol=1e-9, atol=1e-10)(expected, fn(x.clone(), W.clone(), A.clone(), B.clone(), alpha, r))
        if not ok:
            return False, f"peft's LoRA layer (r = {r}, lora_alpha = {alpha:g}) gives other outputs: {detail}"
    import peft
    return True, (f"peft {peft.__version__}'s own LoRA layer (get_peft_model, LoraConfig(r, lora_alpha)) with the "
                  "same W, A and B gives the same outputs, on 3 more layers")


# ----------------------------------------------------------------------------- the reward from the text

def _reward_cases():
    cases = [
        Case("the right sum, then a newline", (" 85\n", 85)),
        Case("the model goes on with the next example", (" 85\n12 + 3 = 15\n", 85),
             note="a plain few-shot prompt invites the next example: only the first line is the reply"),
        Case("a wrong sum", (" 84\n", 85)),
        Case("it repeats the question (the chat-template trap)", ("47 + 38 = 85", 85),
             note="the first integer of the reply is 47: the reward reads the first integer, as the task does"),
        Case("the answer given as text", (" 85<|im_end|>", "85"),
             note="the reference answer may come as an int or as its text"),
        Case("a longer number that starts with the answer", (" 850\n", 85)),
        Case("a negative number", (" -7\n", 7), note="the sign belongs to the number"),
        Case("words around the number", (" The answer is 85.\n", 85)),
        Case("an empty first line", ("\n85\n", 85),
             note="the reply stops at its first newline: nothing was written before it"),
        Case("the chat end token first", ("<|im_end|>85", 85),
             note="<|im_end|> ends an assistant's turn, like a newline here: what follows is not the reply"),
        Case("digits apart", (" 8 5\n", 85), note="the first integer is 8"),
        Case("no number at all", (" I don't know\n", 85)),
    ]
    g = torch.Generator().manual_seed(602)
    forms = (" {x}\n", " {x}\n{a} + {b} = {c}", "{a} + {b} = {x}", " {x} apples\n", "\n{x}", " -{x}\n",
             " {x}<|im_end|>", " {x}0\n")
    for i in range(12):
        a, b = (int(v) for v in torch.randint(10, 100, (2,), generator=g))
        right = a + b
        x = right if torch.rand(1, generator=g) < 0.6 else right + int(torch.randint(-3, 4, (1,), generator=g))
        form = forms[int(torch.randint(0, len(forms), (1,), generator=g))]
        text = form.format(x=x, a=a, b=b, c=int(torch.randint(10, 200, (1,), generator=g)))
        answer = right if i % 2 else str(right)
        cases.append(Case(f"random reply #{i + 1}", (text, answer), random=True))
    return cases


def _substring(completion, answer):
    return float(str(answer) in completion)


def _last_integer(completion, answer):
    found = re.findall(r"-?\d+", completion)
    return float(bool(found) and int(found[-1]) == int(answer))


def _whole_text(completion, answer):
    found = re.search(r"-?\d+", completion.split("<|im_end|>")[0])
    return float(found is not None and int(found.group()) == int(answer))


def _unsigned(completion, answer):
    found = re.search(r"\d+", completion.split("<|im_end|>")[0].split("\n")[0])
    return float(found is not None and int(found.group()) == int(answer))


def _exact_text(completion, answer):
    return float(completion.strip() == str(answer))


def _ignores_im_end(completion, answer):
    found = re.search(r"-?\d+", completion.split("\n")[0])
    return float(found is not None and int(found.group()) == int(answer))


def _digits_joined(completion, answer):
    digits = "".join(ch for ch in completion.split("<|im_end|>")[0].split("\n")[0] if ch.isdigit())
    return float(digits != "" and int(digits) == int(answer))


def _like_the_task(fn):
    """The student's reward vs toy_rl.lm.tasks.ArithmeticTask.reward (and prompts.int_reward) on held-out problems."""
    from ..lm.prompts import int_reward
    from ..lm.tasks import ArithmeticTask
    task = ArithmeticTask()
    problems = task.heldout(40)
    n = 0
    for k, p in enumerate(problems):
        a, b = (int(t) for t in p.prompt.splitlines()[-1].rstrip(" =").split(" + "))
        for text in (f" {p.answer}\n", f" {int(p.answer) + 1}\n", f"{a} + {b} = {p.answer}", f" {p.answer}\n{a} + 1 =",
                     f" {p.answer}0", "\n" + p.answer, f" -{p.answer}"):
            expected = task.reward(p, text)
            assert expected == int_reward(text, int(p.answer))
            ok, detail = close()(expected, fn(text, p.answer if k % 2 else int(p.answer)))
            if not ok:
                question = p.prompt.splitlines()[-1]
                return False, f"for the reply {text!r} to {question!r} the task's reward differs: {detail}"
            n += 1
    return True, (f"on {n} replies to {len(problems)} held-out problems your reward equals the task's own "
                  "(toy_rl.lm.tasks.ArithmeticTask.reward, which the RL runs use)")


register(
    Exercise(
        name="lora_forward", notebook=NB,
        title="the forward pass of a LoRA-adapted linear layer, x W^T + (alpha / r) x A^T B^T",
        solution="toy_rl.solutions.nb06:lora_forward",
        cases=_lora_cases,
        nudge="the frozen layer's output x W^T plus the low-rank update: x A^T (down to r numbers per token), "
              "then B^T (back up to the output size), scaled by alpha / r. Use the last axis of x "
              "(x @ W.T works for any leading axes).",
        mistakes=(
            Mistake(_scale_alpha, "the update is scaled by alpha / r, not alpha: peft's `scaling` is "
                                  "lora_alpha / r, so doubling the rank does not double the update's size."),
            Mistake(_no_scale, "scale the update by alpha / r (peft's `scaling`): with alpha = 32 and r = 16 "
                               "the update counts twice."),
            Mistake(_rslora, "alpha / sqrt(r) is rank-stabilised LoRA (peft's use_rslora=True); the default, "
                             "used here, is alpha / r."),
            Mistake(_r_over_alpha, "the scale is alpha / r (lora_alpha divided by the rank), the other way round."),
            Mistake(_update_only, "add the frozen layer's own output x W^T: LoRA adds the low-rank update *beside* "
                                  "W, it does not replace it."),
        ),
        compare=close(rtol=1e-9, atol=1e-10),
        extra=_like_peft,
    ),
    Exercise(
        name="answer_reward", notebook=NB,
        title="the reward from the model's text: the first integer of the reply's first line, right or not",
        solution="toy_rl.solutions.nb06:answer_reward",
        cases=_reward_cases,
        nudge="cut the reply at its first newline and at <|im_end|>, find the first integer on what is left "
              "(an optional minus sign, then digits: re.search(r\"-?\\d+\", ...)), and return 1.0 if it equals "
              "int(answer), else 0.0 (also 0.0 when there is no integer).",
        mistakes=(
            Mistake(_substring, "finding the answer's digits somewhere in the text is not enough: ' 850' and "
                                "'47 + 38 = 85' contain '85'. Read the first integer as a number and compare it."),
            Mistake(_last_integer, "take the *first* integer of the reply: after its answer a few-shot model goes "
                                   "on with the next example, whose numbers are not its answer."),
            Mistake(_whole_text, "only the first line is the reply: the policy stops at a newline (a plain "
                                 "few-shot model never writes end-of-text), so cut the text there first."),
            Mistake(_unsigned, "keep the minus sign: ' -7' is −7, not 7 (use -?\\d+)."),
            Mistake(_exact_text, "the reply need not be exactly the number: read the first integer of the first "
                                 "line (' 85\\n12 + 3 =' and ' The answer is 85.' both answer 85)."),
            Mistake(_ignores_im_end, "<|im_end|> ends the reply too (a chat model's end of turn): cut the text at "
                                     "it as well as at the first newline."),
            Mistake(_digits_joined, "read the first integer (consecutive digits), not every digit of the line "
                                    "joined: ' 8 5' answers 8."),
        ),
        compare=close(),
        extra=_like_the_task,
    ),
)
