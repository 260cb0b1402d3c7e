"""Shared fixtures."""
import pytest

from toy_rl.threads import single_thread


@pytest.fixture(scope="module")
def one_thread():
    """Tiny models run as fast on one torch thread, and on a busy 2-core machine two threads spin
    against other processes (measured: sampling 8x8x8 SmolLM2 tokens 9-42 s on 2 threads, 3 s on 1)."""
    with single_thread():
        yield
