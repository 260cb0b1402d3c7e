"""Benchmark: one RL step of toy_rl's loop against TRL's GRPOTrainer, on CPU, on identical work.

Target (issue): toy_rl's completions per second per RL step (generation + scoring +
update) are at least 3x TRL's on the default rung-2 workload: 16 prompts x 8
answers of the "add" task, answers of at most 4 tokens, a 4-layer GPT (d_model 64,
4 heads, vocab 51, context 128).

The same model three times, with the same weights (the cached rung-2 warm start):

* TRL        GRPOTrainer on a Hugging Face GPT-2 of that shape (learned positions,
             exact GELU, no dropout) with a character-level tokenizer built here
             (no download): the warm-started weights copied in;
* ours (HF)  toy_rl's loop (BatchSource + the update of toy_rl.rl.loop.train) on a
             copy of that same GPT-2 through toy_rl.lm.policy.HFPolicy;
* ours (GPT) toy_rl's loop on rung 2's own GPT through TinyPolicy.

Same settings on every side: clip-higher (eps 0.2 / 0.28), token-mean loss, GRPO
advantages (group std), no KL (beta 0, no reference model), one update per
generation batch, AdamW lr 3e-4 (constant), gradient clip 1.0, temperature 1
(top_k 0, top_p 1), float32, no gradient checkpointing, no logging, no eval, no
saving; the same prompts on both sides, step by step. Steps are interleaved: after each TRL step (timed from the end of the
previous one, so TRL's own loop overhead counts), one step of each of ours runs
inside a TrainerCallback, in alternating order. Medians over the measured steps,
after warm-up steps on every side.

Run: python bench/bench_vs_trl.py [--steps 10] [--warmup 3] [--threads 1]
"""
from __future__ import annotations

import argparse
import copy
import os
import platform
import random
import statistics
import tempfile
import time
import warnings

import torch

from toy_rl.arithmetic.hf_twin import char_tokenizer, gpt2_twin  # noqa: F401  (bench_sampler imports them from here)
from toy_rl.arithmetic.model import tokenizer as chars
from toy_rl.arithmetic.tasks import get_task
from toy_rl.arithmetic.tasks.base import Problem

TARGET = 3.0
EPS_LOW, EPS_HIGH = 0.2, 0.28          # clip-higher: [0.8, 1.28], TRL's epsilon / epsilon_high


def machine() -> str:
    import transformers
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, load average {load:.1f} at "
            f"start, {torch.get_num_threads()} torch thread(s), torch {torch.__version__}, transformers "
            f"{transformers.__version__}")


def quiet() -> None:
    """Silence the deprecation / config chatter of transformers, TRL and peft (not errors)."""
    warnings.filterwarnings("ignore")
    import logging
    for name in ("transformers", "trl", "peft", "accelerate", "datasets"):
        logging.getLogger(name).setLevel(logging.ERROR)
    try:
        from transformers.utils import logging as hf_logging
        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
    except ImportError:
        pass


def warm_model():
    """The cached rung-2 warm start for "add" (trained first if missing, ~30 s)."""
    from toy_rl.arithmetic.warmstart import load_warmstart
    return load_warmstart(get_task("add"), device="cpu", progress=False)


def check_twins(gpt, hf, tokenizer) -> float:
    """Largest |log-prob difference| between TinyPolicy.score and HFPolicy.score on a left-padded batch."""
    from toy_rl.lm.policy import HFPolicy
    from toy_rl.arithmetic.policy import TinyPolicy
    tiny, hfp = TinyPolicy(gpt), HFPolicy(hf, tokenizer, stop_ids=[chars.EOS_ID], share_prompts=False)
    rows = [hfp.encode(p) + chars.encode(a) for p, a in [("47+28=", "75"), ("3+4=", "7"), ("10-99=", "-89")]]
    assert rows[1] == tiny.encode("3+4=") + chars.encode("7")
    ids, mask = chars.left_pad(rows)
    with torch.no_grad():
        a, _ = tiny.score(ids, mask, 4)
        b, _ = hfp.score(ids, mask, 4)
    real = mask[:, 3:-1] * mask[:, 4:]            # token and the one before it real (padding rows differ, unused)
    return float(((a - b) * real).abs().max())


# ------------------------------------------------------------------- one step of our loop
class Timed:
    """Wraps a callable and keeps the seconds of each call since the last ``take()``."""

    def __init__(self, fn):
        self.fn, self.pending = fn, 0.0

    def __call__(self, *a, **k):
        t0 = time.perf_counter()
        try:
            return self.fn(*a, **k)
        finally:
            self.pending += time.perf_counter() - t0

    def take(self) -> float:
        out, self.pending = self.pending, 0.0
        return out


class Side:
    """Per-step records of one side: total seconds, sampling seconds, rollout seconds, completions, length, reward."""

    def __init__(self, name):
        self.name = name
        self.rows = []

    def add(self, total, sampling, rollout, completions, length, reward):
        self.rows.append(dict(total=total, sampling=sampling, rollout=rollout, completions=completions,
                              length=length, reward=reward))

    def report(self, warmup) -> float:
        rows = self.rows[warmup:]
        med = lambda k: statistics.median(r[k] for r in rows)
        cps = statistics.median(r["completions"] / r["total"] for r in rows)
        t = [r["total"] for r in rows]
        print(f"  {self.name:<11} {med('total') * 1e3:7.1f} ms/step (min {min(t) * 1e3:6.1f}, max "
              f"{max(t) * 1e3:6.1f}) {cps:7.1f} completions/s | sampling {med('sampling') * 1e3:6.1f} ms, rest of "
              f"rollout+reward {(med('rollout') - med('sampling')) * 1e3:5.1f} ms, update and the rest "
              f"{(med('total') - med('rollout')) * 1e3:6.1f} ms | mean answer "
              f"{statistics.mean(r['length'] for r in rows):.2f} tokens, reward "
              f"{statistics.mean(r['reward'] for r in rows):.3f}")
        return cps


# ------------------------------------------------------------------- one step of our loop
class OurLoop:
    """The body of toy_rl.rl.loop.train for one update (no held-out eval, no checkpoint), set up as train() does."""

    def __init__(self, name, policy, task, prompts, group_size, max_new_tokens, lr, rule="clip-higher", seed=0):
        from toy_rl.clipping import make_rule
        from toy_rl.rl.loop import RLConfig, make_optimizer
        from toy_rl.rl.sources import BatchSource
        self.cfg = RLConfig(rule=rule, prompts=prompts, group_size=group_size, max_new_tokens=max_new_tokens, lr=lr,
                            temperature=1.0, eval_every=0, seed=seed)
        self.policy, self.rule = policy, make_rule(rule)
        self.sampler = policy.sample = Timed(policy.sample)              # to split the step's time
        self.source = BatchSource(policy, task, prompts, group_size, max_new_tokens, 0, "reuse", None, 1.0,
                                  self.cfg.advantage, seed)
        self.optimizer = make_optimizer(policy, lr)                   # as train() builds it
        self.version = 0
        self.side = Side(name)
        self.prompts = []                                               # per step, to compare with TRL's
        policy.eval()

    def step(self) -> None:
        from toy_rl.rl.loop import batch_metrics, update
        t0 = time.perf_counter()
        batch = self.source.next(self.version)                  # rollout, rewards, advantages
        record = batch_metrics(batch, self.version)
        t1 = time.perf_counter()
        record.update(update(self.policy, self.optimizer, batch, self.rule, self.cfg))
        t2 = time.perf_counter()
        self.version += 1
        self.prompts.append([g.problem.prompt for g in batch.groups])
        self.side.add(t2 - t0, self.sampler.take(), t1 - t0, batch.response_mask.shape[0],
                      float(batch.response_mask.sum(1).mean()), record["reward_mean"])


def recording(reward_fn, store: list, group: int):
    """``reward_fn`` for TRL, also keeping each call's distinct prompts (TRL repeats each ``group`` times)."""
    def reward(prompts, completions, **kw):
        store.append(list(prompts[::group]))
        return reward_fn(prompts, completions, **kw)
    reward.__name__ = reward_fn.__name__
    return reward


def same_prompts(ours: list, theirs: list) -> str:
    n = min(len(ours), len(theirs))
    return "yes" if n and ours[:n] == theirs[:n] else "NO"


def same_problems(task, args) -> list:
    """The prompts our BatchSource draws, step by step (its rng is random.Random(seed), P problems per
    step); TRL reads them in this order (shuffle_dataset=False), so both sides see the same prompts."""
    rng = random.Random(args.seed)
    return [p for _ in range(args.warmup + args.steps + 1) for p in task.sample(args.prompts, rng)]


def trl_trainer(model, tokenizer, data, reward, args, out, **config):
    """GRPOTrainer as configured for these benchmarks (see the module docstring), plus ``config`` overrides."""
    from transformers import PrinterCallback
    from trl import GRPOConfig, GRPOTrainer
    settings = dict(
        output_dir=out, per_device_train_batch_size=args.prompts * args.group, gradient_accumulation_steps=1,
        num_generations=args.group, max_completion_length=args.max_new, num_iterations=1, beta=0.0,
        epsilon=EPS_LOW, epsilon_high=EPS_HIGH, loss_type="dapo", scale_rewards="group",
        temperature=1.0, top_k=0, top_p=1.0, learning_rate=args.lr, lr_scheduler_type="constant",
        weight_decay=0.0, max_grad_norm=1.0, warmup_steps=0, gradient_checkpointing=False, bf16=False,
        fp16=False, use_cpu=True, disable_dropout=True, report_to="none", logging_strategy="no",
        save_strategy="no", eval_strategy="no", disable_tqdm=True, log_completions=False, shuffle_dataset=False,
        dataloader_num_workers=0, seed=args.seed, max_steps=args.warmup + args.steps)
    settings.update(config.pop("settings", {}))
    trainer = GRPOTrainer(model=model, reward_funcs=reward, args=GRPOConfig(**settings), train_dataset=data,
                          processing_class=tokenizer, **config)
    trainer.remove_callback(PrinterCallback)             # no end-of-training metrics dump
    return trainer


def interleave(trainer, side: Side, ours: list, threads: int):
    """Time TRL's steps (end to end, its loop overhead included) and run one step of each of ``ours``
    after each of them (order alternating), outside TRL's timing."""
    from transformers import TrainerCallback
    generate = trainer.model.generate = Timed(trainer.model.generate)
    score = trainer._generate_and_score_completions = Timed(trainer._generate_and_score_completions)

    class Interleave(TrainerCallback):
        mark = None

        def on_train_begin(self, *a, **k):
            self.mark = time.perf_counter()

        def on_step_end(self, args_, state, control, **k):
            total = time.perf_counter() - self.mark
            m = trainer._metrics["train"]
            side.add(total, generate.take(), score.take(), args_.per_device_train_batch_size,
                     m["completions/mean_length"][-1], m["reward"][-1])
            if torch.get_num_threads() != threads:
                raise RuntimeError(f"torch threads changed to {torch.get_num_threads()} during TRL's step")
            for loop in (ours if state.global_step % 2 else ours[::-1]):
                loop.step()
            self.mark = time.perf_counter()

    trainer.add_callback(Interleave())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=10, help="measured RL steps per side (default %(default)s)")
    ap.add_argument("--warmup", type=int, default=3, help="untimed RL steps per side first (default %(default)s)")
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--group", type=int, default=8, help="answers per prompt (GRPO group size)")
    ap.add_argument("--max-new", type=int, default=4, help="answer tokens at most (add task: 3 characters + EOS)")
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--threads", type=int, default=1, help="torch threads, both sides (default %(default)s)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    quiet()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)

    import trl
    from datasets import Dataset

    from toy_rl.lm.policy import HFPolicy
    from toy_rl.arithmetic.policy import TinyPolicy

    task = get_task("add")
    gpt = warm_model()
    tokenizer = char_tokenizer()
    hf = gpt2_twin(gpt)
    diff = check_twins(gpt, hf, tokenizer)
    batch = args.prompts * args.group
    n_params = sum(p.numel() for p in gpt.parameters())
    print(f"toy_rl RL step vs TRL {trl.__version__} GRPOTrainer, CPU ({machine()})")
    print(f"work per step: {args.prompts} prompts x {args.group} answers = {batch} completions of the 'add' task, "
          f"<= {args.max_new} new tokens, temperature 1; model: {gpt.config.n_layer} layers, d_model "
          f"{gpt.config.d_model}, {gpt.config.n_head} heads, vocab {gpt.config.vocab_size}, context "
          f"{gpt.config.block_size}, {n_params / 1e3:.0f}k parameters (rung-2 warm start), float32")
    print(f"update: clip-higher [{1 - EPS_LOW}, {1 + EPS_HIGH}], token-mean, GRPO advantages, beta 0, one update "
          f"per batch, AdamW lr {args.lr}, grad clip 1.0; GPT-2 twin vs our GPT: max |dlogp| {diff:.1e}")

    ours_hf = OurLoop("ours (HF)", HFPolicy(copy.deepcopy(hf), tokenizer, stop_ids=[chars.EOS_ID]), task,
                      args.prompts, args.group, args.max_new, args.lr, seed=args.seed)
    ours_gpt = OurLoop("ours (GPT)", TinyPolicy(copy.deepcopy(gpt)), task, args.prompts, args.group, args.max_new,
                       args.lr, seed=args.seed)

    problems = same_problems(task, args)
    data = Dataset.from_dict({"prompt": [p.prompt for p in problems], "answer": [p.answer for p in problems]})

    if tokenizer(text=[problems[0].prompt])["input_ids"][0] != ours_hf.policy.encode(problems[0].prompt):
        raise RuntimeError("TRL would tokenize the prompt differently from HFPolicy.encode")

    def add_reward(prompts, completions, answer, **_):
        return [task.reward(Problem(p, a), c) for p, c, a in zip(prompts, completions, answer)]

    theirs, trl_prompts = Side("TRL"), []
    with tempfile.TemporaryDirectory() as out:
        trainer = trl_trainer(copy.deepcopy(hf), tokenizer, data, recording(add_reward, trl_prompts, args.group),
                              args, out)
        interleave(trainer, theirs, [ours_hf, ours_gpt], args.threads)
        trainer.train()
    opt = trainer.optimizer
    print(f"optimizers: TRL {type(opt).__name__} (fused={opt.defaults.get('fused')}), ours AdamW "
          f"(fused={ours_gpt.optimizer.defaults.get('fused')})")
    print(f"TRL as run: gradient checkpointing {trainer.model.is_gradient_checkpointing}, generation batch "
          f"{trainer.args.generation_batch_size}, steps per generation {trainer.args.steps_per_generation}, "
          f"model left in {'train' if trainer.model.training else 'eval'} mode; {torch.get_num_threads()} thread(s); "
          f"same prompts as ours at every step: {same_prompts(ours_hf.prompts, trl_prompts)} (HF), "
          f"{same_prompts(ours_gpt.prompts, trl_prompts)} (GPT)")
    print(f"{args.steps} measured steps per side after {args.warmup} warm-up steps, interleaved; medians "
          "(sampling = model.generate for TRL, policy.sample for ours):")
    cps_trl = theirs.report(args.warmup)
    cps_hf = ours_hf.side.report(args.warmup)
    cps_gpt = ours_gpt.side.report(args.warmup)
    r_hf, r_gpt = cps_hf / cps_trl, cps_gpt / cps_trl
    print(f"ours (HF) / TRL  = {r_hf:.2f}x completions/s (same GPT-2, same tokenizer)")
    print(f"ours (GPT) / TRL = {r_gpt:.2f}x completions/s (our own GPT of the same shape)")
    ok = r_gpt >= TARGET
    print(f"target ours >= {TARGET}x TRL on the rung-2 default (our GPT, TinyPolicy): {'met' if ok else 'NOT met'}"
          f"; on the GPT-2 twin through HFPolicy: {'met' if r_hf >= TARGET else 'NOT met'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
