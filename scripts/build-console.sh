#!/usr/bin/env bash
# Builds the console's hydrate bundle (wasm + JS glue) without cargo-leptos.
#
#   scripts/build-console.sh [OUT_DIR]
#
# OUT_DIR defaults to <workspace>/target/console-pkg, the directory the server's
# `ConsoleAssets::workspace_default()` reads. It receives engram-console.js and
# engram-console_bg.wasm, served at /console/pkg/.
#
# Environment:
#   CARGO_TARGET_DIR   where cargo builds (default <workspace>/target)
#   CONSOLE_PROFILE    `wasm-release` (default: small, optimised) or `dev` (faster to build)
#
# The wasm-bindgen CLI must match the wasm-bindgen crate in Cargo.lock exactly, or the
# generated glue does not fit the module; a missing or different CLI is installed with
# `cargo install`. Re-running with nothing changed only costs cargo's no-op check.
set -euo pipefail

workspace="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$workspace"

out_dir="${1:-$workspace/target/console-pkg}"
target_dir="${CARGO_TARGET_DIR:-$workspace/target}"
profile="${CONSOLE_PROFILE:-wasm-release}"
name="engram-console" # keep in sync with engram_console::BUNDLE_NAME
cargo_home="${CARGO_HOME:-$HOME/.cargo}"

log() { printf 'build-console: %s\n' "$*" >&2; }

# --- an unchanged console is never rebuilt -------------------------------------------------
# The bundle depends only on these inputs (the console uses no workspace crate), so their hash
# names it. Bundles are kept by hash in the cargo target dir, which outlives a fresh clone in
# CI (see .ci/run), and copied into OUT_DIR.
input_hash="$(
  {
    find web/console -type f -not -path '*/target/*' -print0 | sort -z | xargs -0 sha256sum
    sha256sum Cargo.lock Cargo.toml rust-toolchain.toml scripts/build-console.sh
    echo "profile=$profile"
  } | sha256sum | awk '{ print $1 }'
)"
cached_bundle="$target_dir/console-bundles/$input_hash"
# Records OUT_DIR's bundle as the one for these inputs, here and in the target dir's cache.
remember_bundle() {
  printf '%s\n' "$input_hash" >"$out_dir/.input-hash"
  mkdir -p "$target_dir/console-bundles"
  rm -rf "$cached_bundle.tmp"
  cp -a "$out_dir" "$cached_bundle.tmp"
  rm -f "$cached_bundle.tmp/.input-hash"
  rm -rf "$cached_bundle"
  mv "$cached_bundle.tmp" "$cached_bundle"
}
if [[ -f "$out_dir/.input-hash" && "$(cat "$out_dir/.input-hash")" == "$input_hash" \
  && -f "$out_dir/$name.js" && -f "$out_dir/${name}_bg.wasm" ]]; then
  log "bundle up to date in $out_dir (inputs unchanged)"
  exit 0
fi
if [[ -f "$cached_bundle/$name.js" && -f "$cached_bundle/${name}_bg.wasm" ]]; then
  mkdir -p "$(dirname "$out_dir")"
  staging="$(mktemp -d "$out_dir.tmp.XXXXXX")"
  cp -a "$cached_bundle/." "$staging/"
  printf '%s\n' "$input_hash" >"$staging/.input-hash"
  chmod 755 "$staging"
  rm -rf "$out_dir"
  mv "$staging" "$out_dir"
  log "bundle for these inputs taken from $cached_bundle (nothing rebuilt)"
  exit 0
fi

# --- wasm-bindgen CLI at the version in Cargo.lock --------------------------------------
lock_version="$(awk '
  $0 == "name = \"wasm-bindgen\"" { found = 1; next }
  found && /^version = / { gsub(/"/, "", $3); print $3; exit }
' Cargo.lock 2>/dev/null || true)"
if [[ -z "$lock_version" ]]; then
  # No lock entry yet (fresh checkout without Cargo.lock): let cargo resolve one.
  cargo metadata --format-version 1 >/dev/null
  lock_version="$(awk '
    $0 == "name = \"wasm-bindgen\"" { found = 1; next }
    found && /^version = / { gsub(/"/, "", $3); print $3; exit }
  ' Cargo.lock)"
fi

bindgen_version() { "$1" --version 2>/dev/null | awk '{ print $2 }'; }

wasm_bindgen=""
for candidate in "$(command -v wasm-bindgen || true)" "$cargo_home/bin/wasm-bindgen"; do
  if [[ -n "$candidate" && -x "$candidate" && "$(bindgen_version "$candidate")" == "$lock_version" ]]; then
    wasm_bindgen="$candidate"
    break
  fi
done
if [[ -z "$wasm_bindgen" ]]; then
  log "installing wasm-bindgen-cli $lock_version (takes a few minutes)"
  # No --locked: the CLI's own lock file does not build with this toolchain.
  # Its build goes to a side directory so it neither pollutes nor waits on the main target dir.
  CARGO_TARGET_DIR="$target_dir/wasm-bindgen-cli" \
    cargo install wasm-bindgen-cli --version "$lock_version" --force
  wasm_bindgen="$cargo_home/bin/wasm-bindgen"
  if [[ "$(bindgen_version "$wasm_bindgen")" != "$lock_version" ]]; then
    log "error: $wasm_bindgen is not version $lock_version after install"
    exit 1
  fi
fi

# --- the wasm module ---------------------------------------------------------------------
profile_args=()
bindgen_args=(--target web --no-typescript --out-name "$name")
case "$profile" in
  dev)
    profile_dir="debug"
    profile_args=(--profile dev)
    ;;
  wasm-release)
    # Defined here rather than in the root Cargo.toml, which the console does not own.
    # Size matters more than speed for a bundle every page load downloads.
    profile_dir="wasm-release"
    profile_args=(
      --profile wasm-release
      --config 'profile.wasm-release.inherits="release"'
      --config 'profile.wasm-release.opt-level="z"'
      --config 'profile.wasm-release.lto=true'
      --config 'profile.wasm-release.codegen-units=1'
      --config 'profile.wasm-release.debug=false'
      --config 'profile.wasm-release.panic="abort"'
    )
    # The name section (function names for panic backtraces) is ~80% of the module.
    bindgen_args+=(--remove-name-section --remove-producers-section)
    ;;
  *)
    log "error: CONSOLE_PROFILE must be wasm-release or dev, not '$profile'"
    exit 2
    ;;
esac

log "building $name for wasm32-unknown-unknown ($profile)"
CARGO_TARGET_DIR="$target_dir" cargo rustc -p engram-console --lib --crate-type cdylib \
  --target wasm32-unknown-unknown --no-default-features --features hydrate \
  "${profile_args[@]}"

wasm="$target_dir/wasm32-unknown-unknown/$profile_dir/engram_console.wasm"
if [[ ! -f "$wasm" ]]; then
  log "error: cargo did not produce $wasm"
  exit 1
fi

# --- JS glue -----------------------------------------------------------------------------
# Skip wasm-bindgen when neither the module nor the CLI changed since the last run.
stamp="$out_dir/.build-stamp"
want_stamp="$(sha256sum "$wasm" | awk '{ print $1 }') wasm-bindgen-$lock_version ${bindgen_args[*]}"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want_stamp" \
  && -f "$out_dir/$name.js" && -f "$out_dir/${name}_bg.wasm" ]]; then
  remember_bundle
  log "bundle up to date in $out_dir"
  exit 0
fi

# Generate into a fresh directory and swap it in, so a running server never serves a
# half-written bundle (JS glue from one build, wasm from another).
mkdir -p "$(dirname "$out_dir")"
staging="$(mktemp -d "$out_dir.tmp.XXXXXX")"
trap 'rm -rf "$staging"' EXIT
"$wasm_bindgen" "${bindgen_args[@]}" --out-dir "$staging" "$wasm"
printf '%s\n' "$want_stamp" >"$staging/.build-stamp"
chmod 755 "$staging"
if [[ -d "$out_dir" ]]; then
  old="$(mktemp -d "$out_dir.old.XXXXXX")"
  mv "$out_dir" "$old/pkg"
  mv "$staging" "$out_dir"
  rm -rf "$old"
else
  mv "$staging" "$out_dir"
fi
trap - EXIT

remember_bundle
log "bundle written to $out_dir ($(du -h "$out_dir/${name}_bg.wasm" | awk '{ print $1 }') wasm)"
