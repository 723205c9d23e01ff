# The two commands of the README: `make run` and `make test`. Both install what they need.
SHELL := /bin/bash
DATA_DIR ?= ./data
LISTEN ?= 127.0.0.1:8080
CARGO ?= cargo

.PHONY: run test setup setup-test console build bench bench-large bench-1m bench-build bench-http-overhead bench-metering bench-recall bench-recall-events bench-login-storm fuzz schemathesis crash-harness proptest-large fmt lint clean-data

## Start the embedded service (SQLite + in-process Qdrant + local model + console).
run: setup console
	$(CARGO) run -p engram-cli --bin engram -- serve --data-dir $(DATA_DIR) --listen $(LISTEN)

## Run every test: the lints first, then unit, storage on SQLite and PostgreSQL, API end to
## end, browser.
test: setup-test console lint
	$(CARGO) test --workspace --no-fail-fast -- --show-output

setup:
	./scripts/setup.sh run

setup-test:
	./scripts/setup.sh test

## The console's hydration bundle (wasm) in target/console-pkg.
console:
	./scripts/build-console.sh

## Speed, release build: the bare embedding model (the floor: Python onnxruntime, 2 threads,
## length-sorted batches of 16) and then the service through HTTP on the same texts — ingest
## rate, search p50/p95/p99, searches/s and p95 at 1, 4 and 16 clients, search beside an
## ingest loop — for 10k synthetic memories and 10k LoCoMo dev turns, then the LoCoMo turns again
## on the multilingual model (multilingual-e5-small) beside its own bare-model floor. The first release
## build takes ~30 minutes on 2 cores (printed); later ones only rebuild what changed.
BENCH_PYTHON := .cache/bench-venv/bin/python
RELEASE_ENGRAM = $(CARGO) run --quiet --release -p engram-cli --bin engram --
bench: setup bench-build
	$(RELEASE_ENGRAM) bench-speed --set synthetic --memories 10000 --floor-python $(BENCH_PYTHON)
	$(RELEASE_ENGRAM) bench-speed --set locomo --memories 10000 --floor-python $(BENCH_PYTHON)
	$(RELEASE_ENGRAM) bench-speed --set locomo --memories 10000 --model multilingual --floor-python $(BENCH_PYTHON)
## The same at 100k memories, then bench-scale's figures (below) at 100k.
bench-large: setup bench-build
	$(RELEASE_ENGRAM) bench-speed --set synthetic --memories 100000 --floor-python $(BENCH_PYTHON)
	$(RELEASE_ENGRAM) bench-speed --set locomo --memories 100000 --floor-python $(BENCH_PYTHON)
	$(RELEASE_ENGRAM) bench-scale --memories 100000
## One million synthetic memories in one project over 1,000 end-users (client vectors, for
## loading speed), served in one process and loaded and searched from another: load rate until
## the outbox is empty, the index before and after its optimizer, dense, keyword and hybrid
## search at 1 and 16 clients with their phases, hybrid while the optimizer indexes the load
## and beside a load, dense recall@10 against exact search, and the server's resident memory
## (anonymous, file-backed, peak).
bench-1m: setup bench-build
	$(RELEASE_ENGRAM) bench-scale --memories 1000000
bench-build:
	./scripts/setup.sh bench
	@started=$$(date +%s); $(CARGO) build --release -p engram-cli --bin engram \
	  && echo "bench: release build took $$(( $$(date +%s) - started )) s"
## HTTP search against the engine called directly, 10k synthetic memories.
bench-http-overhead: setup
	$(CARGO) run -p engram-cli --bin engram -- bench --memories 10000 --queries 300

## Write and search throughput with usage metering off, then on, in one run; prints the overhead.
bench-metering: setup
	$(CARGO) run -p engram-cli --bin engram -- bench --memories 3000 --queries 300 --compare-metering

## Search latency and throughput with recall events recorded and not, alternating on one server.
bench-recall-events: setup
	$(CARGO) run -p engram-cli --bin engram -- bench --memories 10000 --queries 300 --compare-recall-events

## Search latency idle and during a storm of failed console sign-ins (80 at a time), side by
## side, release build: what a stranger's storm costs the API's users (printed, not asserted).
bench-login-storm: setup bench-build
	$(RELEASE_ENGRAM) bench --memories 2000 --queries 300 --login-storm 80

## Recall on LoCoMo (../shared/bench/locomo): hit@1/5/10 and all@5/10 for dense, keyword (BM25)
## and hybrid retrieval side by side, through the HTTP API. Skips with a message when the data
## is absent.
bench-recall: setup
	$(CARGO) run -p engram-cli --bin engram -- bench-recall --data ../shared/bench/locomo

## Fuzz engram-core's parsers (API keys, the file chunker, the PII detector, ids and names)
## with cargo-fuzz on nightly, FUZZ_SECONDS each (default 60); fails on a crash, panic or hang.
fuzz:
	./scripts/fuzz.sh

## schemathesis (pinned, PyPI) against a fresh server's /openapi.json: every check over the
## examples, coverage, fuzzing and stateful phases, with schemathesis's default example counts;
## ends with 0 failures and 0 errors or fails (`make test` runs a bounded pass of it).
## Fixtures, the operations it must not call and the rules no schema can state:
## tests/schemathesis/schemathesis.toml.
schemathesis: setup-test console
	ENGRAM_SCHEMATHESIS=full $(CARGO) test --workspace --test api -- published_contract --nocapture

## The crash harness with 100 SIGKILL cycles per backend (make test runs 10).
crash-harness: setup-test console
	ENGRAM_CRASH_CYCLES=100 $(CARGO) test --workspace -- sigkill_cycles --nocapture

## The cross-tenant property with 10,000 random operation sequences (make test runs 1,000).
proptest-large: setup-test console
	ENGRAM_PROPTEST_CASES=10000 $(CARGO) test --workspace -- no_response_ever_contains --nocapture

fmt:
	$(CARGO) fmt --all

## clippy over every crate and test with the workspace's lints (Cargo.toml), warnings denied.
lint: setup
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	# The console's development server has a feature of its own: linted so it keeps compiling.
	$(CARGO) clippy -p engram-console --features dev-server --examples -- -D warnings

clean-data:
	rm -rf $(DATA_DIR)
