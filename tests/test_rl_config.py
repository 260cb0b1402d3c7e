"""RLConfig: a rule object or a name, every field checked once, and how rules are labelled and saved."""
import dataclasses
import json
import math

import pytest

from test_rl_loop import TASK, _cfg, _policy
from toy_rl.clipping import BAPO, ClipHigher, FixedBounds, Symmetric
from toy_rl.rl import loop
from toy_rl.rl.config import RLConfig, config_differences, rule_label, rule_spec
from toy_rl.rl.loop import train


@pytest.mark.parametrize("field, bad", [
    ("rule", "ppo"), ("rule", 3), ("staleness", -1), ("staleness", 1.5), ("mode", "async"), ("partial", 0),
    ("steps", 0), ("prompts", 0), ("group_size", 1), ("max_new_tokens", 0), ("lr", 0), ("lr", math.inf),
    ("lr", math.nan), ("temperature", -0.1), ("temperature", math.inf), ("agg", "sum"), ("dual_clip", 1.0),
    ("dual_clip", 0.5), ("advantage", "ppo"), ("max_grad_norm", 0), ("micro_batch", 0), ("eval_every", -1),
    ("eval_size", 0), ("checkpoint_every", 0), ("seed", -1), ("seed", 1.5), ("steps", True),
])
def test_every_field_is_checked_once_with_its_name(field, bad):
    with pytest.raises(ValueError, match=field):
        RLConfig(**{field: bad})


def test_partial_rollout_only_without_other_staleness():
    with pytest.raises(ValueError, match="partial rollout is its own kind of staleness: use it with staleness 0"):
        RLConfig(partial=4, staleness=2)
    RLConfig(partial=4), RLConfig(staleness=2, dual_clip=3, temperature=0, eval_every=0)


def test_numbers_are_stored_as_plain_python_numbers():
    import numpy as np
    cfg = RLConfig(seed=np.int64(3), lr=np.float32(0.5), dual_clip=3)
    assert type(cfg.seed) is int and type(cfg.lr) is float and type(cfg.dual_clip) is float
    json.dumps(cfg.to_dict())


def test_the_config_lives_in_config_py_and_loop_reexports_it():
    assert loop.RLConfig is RLConfig


RULES = [Symmetric(), ClipHigher(), BAPO(), Symmetric(eps=0.3), ClipHigher(eps_high=0.3), FixedBounds(lo=0.6, hi=1.2),
         FixedBounds(lo=0.6, hi=2.0), BAPO(rho0=0.5), BAPO.authors_code(), BAPO(high_range=(1.2, 2.0)),
         BAPO(rho0=0.5, count="all"), BAPO(low_range=(0.6, 0.95), order="lower_first"),
         dataclasses.replace(BAPO.authors_code(), rho0=0.5)]


def test_rule_labels_are_short_readable_and_distinct():
    labels = [rule_label(r) for r in RULES]
    assert labels[:9] == ["symmetric", "clip-higher", "bapo", "symmetric-0.3", "clip-higher-0.2-0.3",
                          "fixed-0.6-1.2", "fixed-0.6-2", "bapo-rho0.5", "bapo-authors"]
    assert labels[9:11] == ["bapo-high1.2-2", "bapo-rho0.5-all"]
    assert len(set(labels)) == len(labels)
    assert all(all(c.isalnum() or c in ".-" for c in label) for label in labels)     # fine as a folder name
    assert [rule_label(n) for n in ("symmetric", "clip-higher", "bapo")] == labels[:3]


def test_a_name_and_its_default_object_are_the_same_rule():
    for name, obj in (("bapo", BAPO()), ("symmetric", Symmetric()), ("clip-higher", ClipHigher())):
        assert rule_spec(obj) == name and RLConfig(rule=obj).to_dict() == RLConfig(rule=name).to_dict()
        assert RLConfig(rule=name).rule_obj == obj
    old = {f.name: getattr(RLConfig(), f.name) for f in dataclasses.fields(RLConfig)}   # a run saved before
    assert old["rule"] == "bapo" and config_differences(old, RLConfig(rule=BAPO())) == {}


def test_other_rules_are_saved_faithfully_and_compare_after_json():
    specs = [rule_spec(r) for r in RULES[3:]]
    assert specs[4] == {"name": "bapo", "class": "BAPO", "params": {**json.loads(json.dumps(
        dataclasses.asdict(BAPO()))), "rho0": 0.5}}
    assert len({json.dumps(s, sort_keys=True) for s in specs}) == len(specs)
    for rule in RULES:
        cfg = RLConfig(rule=rule)
        saved = json.loads(json.dumps(cfg.to_dict()))
        assert config_differences(saved, cfg) == {}
        assert cfg.rule_obj is rule
    assert set(config_differences(RLConfig(rule=BAPO(rho0=0.5)).to_dict(), RLConfig(rule=BAPO(rho0=0.6)))) == {"rule"}


def test_rule_objects_run_at_rung_2_and_resume_by_their_settings(tmp_path):
    records = train(_cfg(rule=BAPO(rho0=0.6), steps=2), _policy(), TASK, tmp_path / "b", progress=False)
    assert {r["rule"] for r in records} == {"bapo-rho0.6"}
    assert json.loads((tmp_path / "b" / "config.json").read_text())["rule"]["params"]["rho0"] == 0.6
    train(_cfg(rule=BAPO(rho0=0.6), steps=2), _policy(), TASK, tmp_path / "b", progress=False)   # same rule: resumes
    with pytest.raises(ValueError, match="another config"):
        train(_cfg(rule=BAPO(rho0=0.5), steps=2), _policy(), TASK, tmp_path / "b", progress=False)
    fixed = train(_cfg(rule=FixedBounds(lo=0.6, hi=1.5), steps=2), _policy(), TASK, tmp_path / "f", progress=False)
    assert [(r["c_low"], r["c_high"], r["rule"]) for r in fixed if "c_low" in r] == [(0.6, 1.5, "fixed-0.6-1.5")] * 2
    train(_cfg(rule="bapo", steps=1), _policy(), TASK, tmp_path / "n", progress=False)
    train(_cfg(rule=BAPO(), steps=2), _policy(), TASK, tmp_path / "n", progress=False)          # extends it
