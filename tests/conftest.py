"""Shared fixtures."""
import pytest

from toy_rl.threads import single_thread


@pytest.fixture(scope="module")
def one_thread():
    """Tiny models run as fast on one torch thread, and on a busy 2-core machine two threads spin
    against other processes (measured: sampling 8x8x8 SmolLM2 tokens 9-42 s on 2 threads, 3 s on 1)."""
    with single_thread():
        yield


@pytest.fixture(scope="module")
def module_cache(tmp_path_factory):
    """TOY_RL_CACHE pointed at a fresh folder for the whole module (warm starts trained once, never the
    user's cache), on one torch thread."""
    mp = pytest.MonkeyPatch()
    mp.setenv("TOY_RL_CACHE", str(tmp_path_factory.mktemp("cache")))
    with single_thread():
        yield
    mp.undo()
