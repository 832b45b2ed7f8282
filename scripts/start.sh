#!/usr/bin/env bash
# Install everything into .venv, then open the workbench on the bundled demo (offline LLM, local embeddings, SQLite).
# It listens on 127.0.0.1 only; arguments go to `memwb ui` (`--host 0.0.0.0` shares it, with sign-in: see README).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
export HF_HUB_OFFLINE=1
exec "${MEMWB_VENV:-.venv}/bin/memwb" ui "$@"
