#!/usr/bin/env bash
# Install Memory Workbench and its dependencies into the project's own virtual environment (.venv), made here
# with `python3 -m venv` on first use: no active virtual environment is needed.
# torch is installed first as its CPU build (on Linux PyPI's plain torch wheel is the CUDA one and pulls several
# GB of nvidia packages), so the project's `torch==2.13.0` is already satisfied.
# MEMWB_VENV names another environment folder; PYTHON names the interpreter that creates it.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${MEMWB_VENV:-.venv}
if [ ! -x "$VENV/bin/python" ]; then
  "${PYTHON:-python3}" -m venv "$VENV"
fi
PY="$VENV/bin/python"
export PIP_DISABLE_PIP_VERSION_CHECK=1
if [ "$(uname -s)" != "Linux" ]; then
  "$PY" -m pip install -q "torch==2.13.0"          # macOS and Windows wheels on PyPI are CPU builds
elif ! "$PY" -m pip install -q "torch==2.13.0+cpu" --extra-index-url https://download.pytorch.org/whl/cpu; then
  echo "install.sh: torch's CPU build is not reachable; installing PyPI's torch 2.13.0 (with CUDA packages)" >&2
  "$PY" -m pip install -q "torch==2.13.0"
fi
"$PY" -m pip install -q -e ".[test]"
echo "installed into $VENV: $("$PY" -c 'import engine, streamlit, torch; print("torch", torch.__version__, "streamlit", streamlit.__version__)')"
