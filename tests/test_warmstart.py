"""Rung 2 warm start: a tiny run lowers the loss, is cached by config, and loads back."""
import json

import pytest
import torch

import toy_rl.arithmetic.warmstart as ws
from toy_rl.cli import main
from toy_rl.arithmetic.model import GPT, ModelConfig, read_meta
from toy_rl.arithmetic.model.evaluate import evaluate
from toy_rl.arithmetic.model.tokenizer import EOS_ID, decode
from toy_rl.arithmetic.tasks import get_task

@pytest.fixture(scope="module", autouse=True)
def _one_thread(one_thread):
    """Every test here on one torch thread (tests/conftest.py)."""


TINY = ws.WarmstartConfig(model=ModelConfig(n_layer=1, n_head=2, d_model=32, block_size=32), max_steps=40,
                          batch_size=32, eval_every=20, eval_problems=20, heldout_problems=20, target_accuracy=2.0)


def test_batch_labels_only_the_answer():
    task = get_task("add")
    problems = task.sample(3, rng=0)
    ids, mask, labels = ws.make_batch(task, problems)
    for i, p in enumerate(problems):
        answer = labels[i][labels[i] != -100].tolist()
        assert answer[-1] == EOS_ID and decode(answer) == task.supervised_target(p)
        assert decode(ids[i]) == p.prompt + task.supervised_target(p)


def test_tiny_warm_start_lowers_loss_caches_and_loads(tmp_path, monkeypatch):
    monkeypatch.setenv("TOY_RL_CACHE", str(tmp_path))
    path = ws.ensure_warmstart("add", TINY, progress=False, device="cpu")
    assert path.parent == tmp_path / "warmstart" and path.name.startswith("add-") and path.suffix == ".pt"
    rows = [json.loads(line) for line in path.with_suffix(".jsonl").read_text().splitlines()]
    losses = [r["loss"] for r in rows if "loss" in r]
    assert len(losses) == 40 and sum(losses[-5:]) / 5 < sum(losses[:5]) / 5 - 0.5
    meta = read_meta(path)
    assert meta["steps"] == 40 and 0 <= meta["heldout_acc_greedy"] <= 1 and meta["task"] == "add"

    def no_training(*a, **k):
        raise AssertionError("should have used the cache")
    monkeypatch.setattr(ws, "train_warmstart", no_training)
    assert ws.ensure_warmstart("add", TINY) == path                       # cached: no retraining
    model = ws.load_warmstart("add", TINY, device="cpu")
    assert isinstance(model, GPT) and model.config == TINY.model and not model.training
    assert model.meta["heldout_acc_greedy"] == meta["heldout_acc_greedy"]
    other = ws.cache_path("add", ws.WarmstartConfig(**{**TINY.__dict__, "seed": 1}))
    assert other != path                                                  # another config, another file


def test_cache_location_and_defaults(tmp_path, monkeypatch):
    monkeypatch.delenv("TOY_RL_CACHE", raising=False)
    assert str(ws.cache_dir()).endswith(".cache/toy_rl/warmstart")
    assert ws.cache_dir(tmp_path) == tmp_path / "warmstart"
    assert ws.cache_path("countdown").name.startswith("countdown-")
    assert ws.default_config("scratchpad").model == ModelConfig()
    with pytest.raises(ValueError, match="unknown task"):
        ws.cache_path("nope")


def test_search_warm_start_runs_a_fixed_number_of_steps_under_its_own_cache_key():
    from toy_rl.arithmetic.tasks.search import SearchTask
    task = SearchTask()
    config = ws.default_config(task)
    assert config.target_accuracy > 1 and config.max_steps < ws.WarmstartConfig().max_steps    # never stops early
    assert ws.cache_path(task, config).name.startswith("search-")
    assert ws.config_hash(task, config) != ws.config_hash(task, ws.WarmstartConfig())
    assert ws.cache_path("add") != ws.cache_path("add", ws.WarmstartConfig(max_steps=600))


def test_warm_start_trains_on_its_own_thread_count_whatever_the_caller_set():
    """torch's sums split by thread count: the same config on 1 and 2 threads gives other weights after a few
    steps, so training pins ``config.threads`` (and the cache key holds it) and restores the caller's setting."""
    config = lambda threads: ws.WarmstartConfig(max_steps=20, eval_every=1000, eval_problems=8, heldout_problems=8,
                                                target_accuracy=2.0, threads=threads)

    def weights(caller: int, threads: int):
        torch.set_num_threads(caller)
        model, summary = ws.train_warmstart("add", config(threads), device="cpu", progress=False)
        assert torch.get_num_threads() == caller and summary["threads"] == threads
        return torch.cat([p.detach().flatten() for p in model.parameters()])

    try:
        pinned = weights(2, 1)
        assert torch.equal(pinned, weights(1, 1))                   # the caller's 2 threads did not leak in
        assert not torch.equal(pinned, weights(1, 2))               # ... and they would have changed the model
    finally:
        torch.set_num_threads(1)
    assert ws.cache_path("add", config(1)) != ws.cache_path("add", config(2))
    from toy_rl.arithmetic.tasks.search import SearchTask
    assert ws.default_config("add").threads == 1 and ws.default_config(SearchTask()).threads == 2


def test_evaluate_is_an_accuracy():
    torch.manual_seed(0)
    model = GPT(TINY.model)
    problems = get_task("add").heldout(16)
    assert evaluate(model, "add", problems) == 0.0                       # an untrained model is never right
    assert evaluate(model, "add", problems, greedy=False, seed=1) == evaluate(model, "add", problems,
                                                                              greedy=False, seed=1)


def test_command_prints_accuracy_and_path(tmp_path, capsys):
    assert main(["warmstart", "--task", "add", "--max-steps", "3", "--cache-dir", str(tmp_path),
                 "--no-progress", "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "held-out accuracy" in out and str(tmp_path) in out
    assert main(["warmstart", "--task", "nope", "--cache-dir", str(tmp_path)]) == 2
    assert "add, countdown, scratchpad" in capsys.readouterr().err
