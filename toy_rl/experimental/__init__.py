"""Experimental code: written against a documented API but NOT run or tested end to end in this project.

    vllm_rollout   rollouts with vLLM + LoRA (needs a GPU and vLLM; only the "vLLM is absent" path is tested)

Nothing in toy_rl imports from here; use it at your own risk and compare its log-probs with
HFPolicy's (``rescore=True`` does that for you).
"""
