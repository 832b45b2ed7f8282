#!/usr/bin/env bash
# Install what the tests need (Python packages into .venv, Debian chromium for the browser tests), then run
# them all, slow and browser tests included.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
if ! command -v chromium >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium chromium-driver >/dev/null
fi
export HF_HUB_OFFLINE=1 PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1
exec "${MEMWB_VENV:-.venv}/bin/python" -m pytest -q -p no:cacheprovider "$@"
