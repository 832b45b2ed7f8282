# Install what the tests need (Python packages into .venv, Debian chromium for the browser tests, Debian
# postgresql for the PostgreSQL cases, the local model server for the live LLM tests: built once from source
# with Debian's g++ and cmake, about 7 minutes on 2 cores, then cached), then run them all, slow, browser and
# live-model tests included, with a throwaway PostgreSQL server on loopback for the duration of the run
# (scripts/pg_test_server.sh; MEMWB_TEST_PG_URL). The 30 slowest tests are listed at the end, to keep the suite
# well inside CI's limit.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium chromium-driver)
bash scripts/pg_test_server.sh bindir >/dev/null 2>&1 || missing+=(postgresql)
command -v g++ >/dev/null 2>&1 || missing+=(g++)
command -v cmake >/dev/null 2>&1 || missing+=(cmake)
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
bash scripts/install_llm.sh
export HF_HUB_OFFLINE=1 PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1
# Workers: one more than the cores (much of a browser test is waiting on a page), at most 4; tests/scheduling.py
# deals out the work. MEMWB_TEST_WORKERS=0 runs the suite in this one process.
cores=$(nproc 2>/dev/null || echo 2)
workers=${MEMWB_TEST_WORKERS:-$(( cores + 1 < 4 ? cores + 1 : 4 ))}
exec bash scripts/pg_test_server.sh run "${MEMWB_VENV:-.venv}/bin/python" -m pytest -q -p no:cacheprovider --durations=30 \
  -n "$workers" --dist loadfile "$@"
