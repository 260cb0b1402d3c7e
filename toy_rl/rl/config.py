"""RLConfig: everything that defines an RL run, checked once; and how a clipping rule is named and saved.

``rule`` may be a name ("symmetric", "clip-higher", "bapo": the rule with its defaults) or any rule
object (anything with a ``name`` and ``bounds()``, see :mod:`toy_rl.clipping`), e.g. ``BAPO(rho0=0.5)``,
``BAPO.authors_code()`` or ``FixedBounds(lo=0.6, hi=1.2)``:

    cfg = RLConfig(rule=BAPO(rho0=0.5), staleness=2)
    cfg.rule_obj            # the rule object the loss uses
    rule_label(cfg.rule)    # "bapo-rho0.5": for folder names, tables and the "rule" of each metric record
    cfg.to_dict()           # what config.json holds; a resume compares it field by field

A name and the equal default object are the same rule: both are saved as the name, so
``RLConfig(rule="bapo")`` and ``RLConfig(rule=BAPO())`` match each other and runs saved before rule
objects were allowed. Any other rule is saved as ``{"name", "class", "params"}`` (its dataclass fields).
"""
from __future__ import annotations

import dataclasses
import math
import numbers
import re
from dataclasses import dataclass

from ..advantages import ADVANTAGES
from ..clipping import BAPO, RULE_CLASSES, as_rule
from ..clipping.checks import AGGREGATIONS
from ..clipping.rules import ClipHigher, FixedBounds, FixedRule, Symmetric
from .sources import MODES


# ------------------------------------------------------------------------------------------------ rules

def _plain(value):
    """A JSON value for a rule parameter: tuples become lists (as JSON reads them back)."""
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    return repr(value)


def _params(rule) -> dict:
    """A rule's settings: its dataclass fields, else its public attributes."""
    if dataclasses.is_dataclass(rule):
        return {f.name: _plain(getattr(rule, f.name)) for f in dataclasses.fields(rule)}
    return {k: _plain(v) for k, v in sorted(vars(rule).items()) if not k.startswith("_")}


def _default_name(rule) -> str | None:
    """The name of the named rule ``rule`` equals (with its defaults), if any."""
    for name, cls in RULE_CLASSES.items():
        try:
            if type(rule) is cls and rule == cls():
                return name
        except Exception:                     # a foreign rule's __eq__: not a named default
            pass
    return None


def rule_spec(rule) -> str | dict:
    """How config.json records ``rule``: the name for a named rule with its defaults, else
    ``{"name": ..., "class": ..., "params": {...}}``. Two rules with equal specs train identically."""
    obj = as_rule(rule)
    name = _default_name(obj)
    if name is not None:
        return name
    return {"name": obj.name, "class": type(obj).__name__, "params": _params(obj)}


def _num(v) -> str:
    """Shortest exact text of a number: 0.6 -> "0.6", 2.0 -> "2" (distinct numbers stay distinct)."""
    text = repr(float(v))
    return text[:-2] if text.endswith(".0") else text


def _value(v) -> str:
    if isinstance(v, (tuple, list)):
        return "-".join(_value(x) for x in v)
    if isinstance(v, numbers.Real) and not isinstance(v, bool):
        return _num(v)
    return str(v).replace("_", "")


_BAPO_KEYS = dict(rho0="rho", low_range="low", high_range="high", low_step="dlow", high_step="dhigh")


def rule_label(rule) -> str:
    """A short readable name, distinct for distinct settings: "bapo", "symmetric", "clip-higher" (defaults),
    "bapo-rho0.5", "bapo-authors" (:meth:`BAPO.authors_code`), "bapo-rho0.5-high1.2-2", "symmetric-0.3",
    "clip-higher-0.2-0.3" (eps_low, eps_high), "fixed-0.6-1.2" (ratio bounds); for folder names and tables."""
    obj = as_rule(rule)
    name = _default_name(obj)
    if name is not None:
        return name
    if isinstance(obj, BAPO):
        if obj == BAPO.authors_code():
            return "bapo-authors"
        default = BAPO()
        parts = [f"{_BAPO_KEYS.get(f.name, '')}{_value(getattr(obj, f.name))}" for f in dataclasses.fields(obj)
                 if getattr(obj, f.name) != getattr(default, f.name)]
        return "-".join(["bapo"] + parts)
    if isinstance(obj, (FixedRule, FixedBounds)):
        extra = [v for v, default in ((obj.count, "grad"), (obj.balance, "share")) if v != default]
        if type(obj) is Symmetric:
            parts = ["symmetric", _num(obj.eps_low)]
        elif type(obj) is ClipHigher:
            parts = ["clip-higher", _num(obj.eps_low), _num(obj.eps_high)]
        else:
            parts = ["fixed", _num(obj.c_low), _num(obj.c_high)]
        return "-".join(parts + [_value(v) for v in extra])
    params = _params(obj)
    try:
        default = _params(type(obj)())
    except Exception:                         # no default to compare with: show every setting
        default = {}
    parts = [f"{k}{_value(v)}" for k, v in params.items() if default.get(k, object()) != v]
    return re.sub(r"[^A-Za-z0-9._-]", "_", "-".join([obj.name] + parts))


# ----------------------------------------------------------------------------------------------- config

def _int(name: str, value, low: int, none_ok: bool = False):
    if value is None and none_ok:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}{' or None' if none_ok else ''}; got {value!r}")
    return int(value)


def _real(name: str, value, low: float, strict: bool, none_ok: bool = False):
    if value is None and none_ok:
        return None
    ok = (not isinstance(value, bool) and isinstance(value, numbers.Real) and math.isfinite(value)
          and (value > low if strict else value >= low))
    if not ok:
        raise ValueError(f"{name} must be a finite number {'>' if strict else '>='} {low:g}"
                         f"{' or None' if none_ok else ''}; got {value!r}")
    return value if isinstance(value, float) else float(value)


def _choice(name: str, value, allowed) -> None:
    if value not in allowed:
        raise ValueError(f"{name} must be one of {tuple(allowed)}; got {value!r}")


@dataclass
class RLConfig:
    """Everything that defines a run (saved beside its metrics; a resume must match it, field by field)."""
    rule: object = "bapo"              # "symmetric", "clip-higher", "bapo" or a rule object (BAPO(rho0=0.5), ...)
    staleness: int = 0                 # K: reuse a batch for K+1 updates, or sample K updates behind
    mode: str = "reuse"                # "reuse" or "lag"
    partial: int | None = None         # token budget per step (partial rollout); None = off
    steps: int = 100                   # updates
    prompts: int = 8                   # prompts per update
    group_size: int = 8                # answers per prompt (G)
    max_new_tokens: int = 16
    lr: float = 1e-4
    temperature: float = 1.0
    agg: str = "token-mean"
    dual_clip: float | None = None
    advantage: str = "grpo"            # "grpo" or "drgrpo" (no std division)
    max_grad_norm: float = 1.0
    micro_batch: int | None = None     # answers per forward pass (gradient accumulation); None = all
    eval_every: int = 10               # updates between held-out evaluations (0: never)
    eval_size: int = 100
    checkpoint_every: int = 10
    seed: int = 0

    def __post_init__(self):
        as_rule(self.rule)
        self.staleness = _int("staleness", self.staleness, 0)
        _choice("mode", self.mode, MODES)
        self.partial = _int("partial (token budget per step)", self.partial, 1, none_ok=True)
        if self.partial is not None and self.staleness != 0:
            raise ValueError("partial rollout is its own kind of staleness: use it with staleness 0 "
                             f"(got partial={self.partial}, staleness={self.staleness})")
        self.steps = _int("steps", self.steps, 1)
        self.prompts = _int("prompts", self.prompts, 1)
        self.group_size = _int("group_size (GRPO compares answers within a group)", self.group_size, 2)
        self.max_new_tokens = _int("max_new_tokens", self.max_new_tokens, 1)
        self.lr = _real("lr", self.lr, 0, strict=True)
        self.temperature = _real("temperature", self.temperature, 0, strict=False)
        _choice("agg", self.agg, AGGREGATIONS)
        self.dual_clip = _real("dual_clip", self.dual_clip, 1, strict=True, none_ok=True)
        _choice("advantage", self.advantage, ADVANTAGES)
        self.max_grad_norm = _real("max_grad_norm", self.max_grad_norm, 0, strict=True)
        self.micro_batch = _int("micro_batch", self.micro_batch, 1, none_ok=True)
        self.eval_every = _int("eval_every", self.eval_every, 0)
        self.eval_size = _int("eval_size", self.eval_size, 1)
        self.checkpoint_every = _int("checkpoint_every", self.checkpoint_every, 1)
        self.seed = _int("seed", self.seed, 0)

    @property
    def rule_obj(self):
        """The rule object the loss uses (a name gives that rule with its defaults)."""
        return as_rule(self.rule)

    @property
    def rule_label(self) -> str:
        """:func:`rule_label` of this config's rule."""
        return rule_label(self.rule)

    def to_dict(self) -> dict:
        """The JSON-ready fields, as config.json holds them (``rule`` as :func:`rule_spec`)."""
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        d["rule"] = rule_spec(self.rule)
        return d


def config_differences(saved: dict, cfg: RLConfig) -> dict:
    """``{field: (saved value, cfg's value)}`` for every field where the saved config.json contents differ
    from ``cfg`` (``steps`` included). A field added since the run was saved counts as its default."""
    defaults = RLConfig().to_dict()
    return {k: (saved.get(k, defaults[k]), v) for k, v in cfg.to_dict().items() if saved.get(k, defaults[k]) != v}
