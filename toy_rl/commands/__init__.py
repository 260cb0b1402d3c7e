"""Subcommands of `toy-rl`, one module each (see toy_rl/cli.py)."""
