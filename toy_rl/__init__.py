"""toy_rl: off-policy clipping for RL on language models, from a bandit to a 7B model."""
__version__ = "0.1.0"
