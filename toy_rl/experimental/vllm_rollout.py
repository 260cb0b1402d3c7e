"""Optional rollouts with vLLM + LoRA: the ``sample`` half of the policy interface. EXPERIMENTAL: never run here.

**Status: written against vLLM's documented API (``LLM``, ``SamplingParams``,
``TokensPrompt``, ``LoRARequest``) but never run: the machine this package is
developed on has no GPU and no vLLM. Only the "vLLM is absent" path is tested.**
The default stays HFPolicy's own sampling loop (``rollout_engine="hf"``).

    from toy_rl.experimental.vllm_rollout import VLLMPolicy, is_available
    policy = VLLMPolicy(hf_policy, "path/to/Qwen2.5-7B-Instruct")   # same weights on disk
    train(cfg, policy, task, out_dir)        # sample() runs in vLLM; score() and training stay in HF

How it works: before every ``sample`` call the policy's current LoRA adapters are
saved (peft ``save_pretrained``) to a fresh folder and handed to vLLM as a new
``LoRARequest``, so each rollout uses exactly the weights the policy has then --
including the older snapshot that the ``lag`` staleness mode loads.

**Two numerics in one ratio.** vLLM computes log-probs with its own kernels
(paged attention, fused sampling, bf16 matmuls in another order), so the
behaviour log-probs it returns differ from HF's ``score`` of the same tokens even
with identical weights: the ratio r = exp(logp_HF - logp_vLLM) is not 1 on-policy,
clip fractions are not 0, and the three clipping rules no longer coincide where
the lab says they must (on-policy, r ≡ 1: docs/protocol.md). Hence ``rescore=True`` (the
default): after sampling, the behaviour log-probs are recomputed with the HF model
(one no-grad forward, in chunks), and vLLM's own numbers are only used if you ask.
A second trap: vLLM >= 0.10.2 returns log-probs *before* temperature by default
(``logprobs_mode="raw_logprobs"``); this module asks for ``processed_logprobs``.

Memory: vLLM holds its own copy of the weights and a KV-cache pool of
``gpu_memory_utilization`` x the GPU, beside the training model
(``toy-rl estimate --engine vllm`` adds the copy).
"""
from __future__ import annotations

import importlib.util
import shutil
import tempfile
from pathlib import Path

import torch

INSTALL = ("vLLM is not installed. It needs Linux and a CUDA GPU, and pins its own torch version, so "
           "install it in a separate virtual environment: pip install vllm  (then add toy_rl's "
           "'llm' extras). Without it, use the default rollout engine: HFPolicy's own sampling "
           "(rollout_engine='hf').")


def is_available() -> bool:
    """Whether vllm can be imported (checked without importing it)."""
    return importlib.util.find_spec("vllm") is not None


class VLLMPolicy:
    """An :class:`~toy_rl.lm.policy.HFPolicy` whose ``sample`` runs in vLLM; everything else
    (``score``, ``encode``, weights, ``train``/``eval``) is the HF policy's.

    hf_policy:
        the LoRA-wrapped HF policy being trained.
    model_path:
        the base model's folder (or a hub name in the local cache) -- the same weights as hf_policy's.
    rescore:
        replace vLLM's behaviour log-probs with the HF model's (recommended; see the module doc).
    rescore_batch:
        rows per no-grad scoring forward (each needs rows x answer length x vocabulary x ~12 bytes).
    gpu_memory_utilization, llm_kwargs:
        passed to ``vllm.LLM``; ``max_lora_rank`` defaults to the adapters' rank.
    """

    def __init__(self, hf_policy, model_path, rescore: bool = True, rescore_batch: int = 8,
                 gpu_memory_utilization: float = 0.3, max_lora_rank: int | None = None, seed: int = 0,
                 **llm_kwargs):
        if not is_available():
            raise ImportError(INSTALL)
        from vllm import LLM
        if rescore_batch < 1:
            raise ValueError(f"rescore_batch must be >= 1; got {rescore_batch}")
        self.hf, self.rescore, self.rescore_batch = hf_policy, rescore, rescore_batch
        rank = max_lora_rank or max(getattr(c, "r", 16) for c in getattr(hf_policy.model, "peft_config", {}).values())
        kwargs = dict(model=str(model_path), enable_lora=True, max_lora_rank=rank, max_loras=1,
                      gpu_memory_utilization=gpu_memory_utilization, seed=seed, **llm_kwargs)
        try:
            self.llm = LLM(logprobs_mode="processed_logprobs", **kwargs)      # vLLM >= 0.10.2
        except TypeError:
            self.llm = LLM(**kwargs)                                          # older: logprobs already processed
        self._dir = Path(tempfile.mkdtemp(prefix="toy_rl_vllm_lora_"))
        self._version = 0

    def __getattr__(self, name):                 # encode, decode, score, pad_id, device, weights, ...
        if name == "hf" or name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.hf, name)

    def close(self) -> None:
        shutil.rmtree(self._dir, ignore_errors=True)

    def _adapters(self):
        from vllm.lora.request import LoRARequest
        previous = self._dir / f"v{self._version}"
        self._version += 1
        path = self._dir / f"v{self._version}"
        self.hf.model.save_pretrained(path)              # adapter_config.json + adapter_model.safetensors
        shutil.rmtree(previous, ignore_errors=True)
        return LoRARequest(f"toy_rl_policy_v{self._version}", self._version, str(path))

    @torch.no_grad()
    def sample(self, prompts, max_new_tokens: int, temperature: float = 1.0, generator=None):
        """Same contract as :meth:`HFPolicy.sample`: one ``(tokens, logps, finished)`` per prompt."""
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1; got {max_new_tokens}")
        if temperature < 0:
            raise ValueError(f"temperature must be >= 0 (0 = greedy); got {temperature}")
        seed = None
        if generator is not None:                        # repeatable: draw vLLM's seed from the loop's generator
            seed = int(torch.randint(0, 2 ** 31 - 1, (1,), generator=generator, device=generator.device))
        params = SamplingParams(n=1, temperature=temperature, top_p=1.0, top_k=-1, max_tokens=max_new_tokens,
                                logprobs=0, stop_token_ids=list(self.hf.stop_ids), seed=seed, detokenize=False)
        requests = [TokensPrompt(prompt_token_ids=[int(t) for t in p]) for p in prompts]
        outs = self.llm.generate(requests, params, lora_request=self._adapters(), use_tqdm=False)
        results = []
        for out in outs:
            c = out.outputs[0]
            tokens = self.hf.cut(list(c.token_ids))
            logps = [float(d[t].logprob) for t, d in zip(tokens, c.logprobs or [])]
            finished = bool(tokens) and tokens[-1] in self.hf._stop
            results.append((tokens, logps, finished))
        if self.rescore:
            results = self._rescore(prompts, results, temperature)
        return results

    def _rescore(self, prompts, results, temperature):
        """Behaviour log-probs from the HF model (eval mode, no grad), so the ratio compares HF with HF.
        Rows are laid out as in :func:`toy_rl.rl.rollout.make_batch`: prompts left-padded, answers right-padded."""
        was_training = self.hf.model.training
        self.hf.model.eval()
        try:
            out = [list(r) for r in results]
            rows = [i for i, (toks, _, _) in enumerate(results) if toks]
            for k in range(0, len(rows), self.rescore_batch):
                chunk = rows[k:k + self.rescore_batch]
                P = max(len(prompts[i]) for i in chunk)
                N = max(len(results[i][0]) for i in chunk)
                ids = torch.full((len(chunk), P + N), self.hf.pad_id, dtype=torch.long)
                mask = torch.zeros_like(ids)
                for row, i in enumerate(chunk):
                    p, a = list(prompts[i]), results[i][0]
                    ids[row, P - len(p):P] = torch.tensor(p)
                    ids[row, P:P + len(a)] = torch.tensor(a)
                    mask[row, P - len(p):P + len(a)] = 1
                logp, _ = self.hf.score(ids, mask, P, temperature)
                for row, i in enumerate(chunk):
                    out[i][1] = logp[row, :len(results[i][0])].float().cpu().tolist()
            return [tuple(r) for r in out]
        finally:
            self.hf.model.train(was_training)


__all__ = ["INSTALL", "VLLMPolicy", "is_available"]
