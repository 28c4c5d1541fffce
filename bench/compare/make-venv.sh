#!/usr/bin/env bash
# Makes the Python environment of `npm run bench:engine -- --compare torch` from PyPI, outside the clone.
# transformers is only for torch_reference.py --self-test. The benchmark runs torch on CPU: set
# TORCH_INDEX=https://download.pytorch.org/whl/cpu for the smaller CPU-only wheel instead of PyPI's.
set -euo pipefail
VENV="${1:-$HOME/.cache/seedflow/venv-bench}"
python3 -m venv "$VENV"
"$VENV/bin/pip" install --upgrade pip
# pinned: the versions the committed figures (and the transformers fixtures) were measured with
"$VENV/bin/pip" install ${TORCH_INDEX:+--index-url "$TORCH_INDEX"} torch==2.15.0
"$VENV/bin/pip" install safetensors transformers==5.24.0
"$VENV/bin/python" -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)'
echo "made $VENV (bench/engine-compare.ts looks here; SEEDFLOW_TORCH_PYTHON overrides)"
