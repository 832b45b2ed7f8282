#!/usr/bin/env bash
# Install Memory Workbench and its dependencies into the current Python.
# torch is pinned to the machine's CPU build first, so nothing pulls in CUDA packages.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
export PIP_DISABLE_PIP_VERSION_CHECK=1
"$PY" -m pip install -q "torch==2.13.0"
"$PY" -m pip install -q -e ".[test]"
echo "installed: $("$PY" -c 'import engine, streamlit, torch; print("torch", torch.__version__, "streamlit", streamlit.__version__)')"
