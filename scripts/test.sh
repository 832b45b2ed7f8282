#!/usr/bin/env bash
# Install what the tests need (Python packages, Debian chromium for the browser tests), then run them all,
# slow and browser tests included.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
if ! command -v chromium >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium chromium-driver >/dev/null
fi
export HF_HUB_OFFLINE=1 PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1
exec "${PYTHON:-python3}" -m pytest -q -p no:cacheprovider "$@"
