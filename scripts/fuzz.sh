#!/usr/bin/env bash
# Fuzz engram-core's parsers with cargo-fuzz (nightly, libFuzzer) for FUZZ_SECONDS each.
# Installs the nightly toolchain and cargo-fuzz when missing. New inputs go to
# tests/fuzz/target/corpus/<target>; the seed corpora in tests/fuzz/corpus stay as they are.
# Any crash, panic or input slower than FUZZ_TIMEOUT seconds fails the run.
set -euo pipefail
cd "$(dirname "$0")/../tests/fuzz"
seconds="${FUZZ_SECONDS:-60}"
timeout="${FUZZ_TIMEOUT:-10}"
targets=(${FUZZ_TARGETS:-api_key file_chunker pii names_and_ids add_body search_body memory_filter cursors_and_tokens eval_cases_jsonl})

rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
command -v cargo-fuzz >/dev/null || cargo +nightly install cargo-fuzz --locked

for target in "${targets[@]}"; do
  mkdir -p "target/corpus/$target"
  started=$(date +%s)
  echo "fuzz: $target for ${seconds} s"
  log="target/fuzz-$target.log"
  status=0
  cargo +nightly fuzz run "$target" "target/corpus/$target" "corpus/$target" -- \
    -max_total_time="$seconds" -timeout="$timeout" -rss_limit_mb=2048 -print_final_stats=1 \
    >"$log" 2>&1 || status=$?
  grep -E '^(#[0-9]+\s+DONE|stat::number_of_executed_units|==[0-9]+==|thread .* panicked|SUMMARY)' "$log" || true
  if [ "$status" -ne 0 ]; then
    tail -n 40 "$log" >&2
    echo "fuzz: $target FAILED (the input is in tests/fuzz/artifacts/$target)" >&2
    exit "$status"
  fi
  echo "fuzz: $target ran $(( $(date +%s) - started )) s without a crash, panic or hang"
done
