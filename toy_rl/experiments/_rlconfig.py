"""TEMPORARY: RLConfig, rule_label and config_differences until toy_rl/rl/config.py (helper rlsafe) is merged;
then this file is deleted and its users import from toy_rl.rl.config."""
try:
    from ..rl.config import RLConfig, config_differences, rule_label
except ImportError:
    import dataclasses

    from ..rl.loop import RLConfig

    def rule_label(rule) -> str:
        if isinstance(rule, str):
            return rule
        raise ValueError(f"rule objects need toy_rl.rl.config; got {rule!r}")

    def config_differences(saved: dict, cfg) -> dict:
        defaults = dataclasses.asdict(RLConfig())
        return {k: (saved.get(k, defaults[k]), v) for k, v in dataclasses.asdict(cfg).items()
                if saved.get(k, defaults[k]) != v}

__all__ = ["RLConfig", "config_differences", "rule_label"]
