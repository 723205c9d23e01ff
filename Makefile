# The two commands of the README: `make run` and `make test`. Both install what they need.
SHELL := /bin/bash
DATA_DIR ?= ./data
LISTEN ?= 127.0.0.1:8080
CARGO ?= cargo

.PHONY: run test setup setup-test console build bench bench-large bench-metering bench-recall bench-recall-events crash-harness proptest-large fmt lint clean-data

## Start the embedded service (SQLite + in-process Qdrant + local model + console).
run: setup console
	$(CARGO) run -p engram-cli --bin engram -- serve --data-dir $(DATA_DIR) --listen $(LISTEN)

## Run every test: unit, storage on SQLite and PostgreSQL, API end to end, browser.
test: setup-test console
	$(CARGO) test --workspace --no-fail-fast -- --show-output

setup:
	./scripts/setup.sh run

setup-test:
	./scripts/setup.sh test

## The console's hydration bundle (wasm) in target/console-pkg.
console:
	./scripts/build-console.sh

## Benchmark: 10k and 100k synthetic memories (prints figures). The same build as `make run`
## and `make test`: its dependencies (candle, qdrant-edge, sqlx), where the time goes, are
## compiled at opt-level 2, so no separate 30-minute release build is needed.
bench: setup
	$(CARGO) run -p engram-cli --bin engram -- bench --memories 10000 --queries 300
bench-large: setup
	$(CARGO) run -p engram-cli --bin engram -- bench --memories 100000 --queries 300

## Write and search throughput with usage metering off, then on, in one run; prints the overhead.
bench-metering: setup
	$(CARGO) run -p engram-cli --bin engram -- bench --memories 3000 --queries 300 --compare-metering

## Search latency and throughput with recall events recorded and not, alternating on one server.
bench-recall-events: setup
	$(CARGO) run -p engram-cli --bin engram -- bench --memories 10000 --queries 300 --compare-recall-events

## Recall on LoCoMo (../shared/bench/locomo): hit@1/5/10 and all@5/10 for dense, keyword (BM25)
## and hybrid retrieval side by side, through the HTTP API. Skips with a message when the data
## is absent.
bench-recall: setup
	$(CARGO) run -p engram-cli --bin engram -- bench-recall --data ../shared/bench/locomo

## The crash harness with 100 SIGKILL cycles per backend (make test runs 10).
crash-harness: setup-test console
	ENGRAM_CRASH_CYCLES=100 $(CARGO) test --workspace -- sigkill_cycles --nocapture

## The cross-tenant property with 10,000 random operation sequences (make test runs 1,000).
proptest-large: setup-test console
	ENGRAM_PROPTEST_CASES=10000 $(CARGO) test --workspace -- no_response_ever_contains --nocapture

fmt:
	$(CARGO) fmt --all

lint:
	$(CARGO) clippy --workspace --all-targets

clean-data:
	rm -rf $(DATA_DIR)
