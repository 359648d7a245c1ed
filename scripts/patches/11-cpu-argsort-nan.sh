#!/usr/bin/env bash
# ggml's CPU argsort sorts with std::sort and `a < b` (or `a > b`) on the
# keys. A NaN key breaks the comparator's strict weak ordering, which
# std::sort requires: undefined behaviour, out-of-bounds reads in practice.
# Keys are data (a router's softmax in a mixture-of-experts layer), so they
# cannot be checked before compute. The comparator now orders NaN after
# every number (ascending; first when descending), a total order.
#
# Before this patch ggml-rs put a clamp to +-FLT_MAX in front of every
# argsort, an extra graph node that llama.cpp's graphs do not have: on a
# GPU backend it kept the router's softmax, top-k and weights from being
# fused into one kernel as they are for llama.cpp (ggml-vulkan's topk_moe),
# and the mixture-of-experts models' logits differed from llama.cpp's on
# the same device. docs/notes/vulkan.md.
# Usage: 11-cpu-argsort-nan.sh GGML_DIR   (idempotent)
set -euo pipefail
python3 - "$1/src/ggml-cpu/ops.cpp" <<'PY'
import sys

MARK = "ggml-rs patch 11-cpu-argsort-nan"
path = sys.argv[1]
src = open(path).read()
if MARK in src:
    sys.exit(0)
old = '''    bool operator()(int32_t a, int32_t b) const {
        if constexpr (order == GGML_SORT_ORDER_ASC) {
            return data[a] < data[b];
        } else {
            return data[a] > data[b];
        }
    }
};'''
new = '''    // ggml-rs patch 11-cpu-argsort-nan: NaN orders after every number
    // (first when descending), so the comparator stays a strict weak order.
    static bool nan_last_less(float x, float y) {
        if (std::isnan(y)) {
            return !std::isnan(x);
        }
        return !std::isnan(x) && x < y;
    }
    bool operator()(int32_t a, int32_t b) const {
        if constexpr (order == GGML_SORT_ORDER_ASC) {
            return nan_last_less(data[a], data[b]);
        } else {
            return nan_last_less(data[b], data[a]);
        }
    }
};'''
n = src.count(old)
if n != 1:
    sys.exit(f"11-cpu-argsort-nan: expected one match in {path}, found {n}")
src = src.replace(old, new)
if "#include <cmath>" not in src:
    src = "#include <cmath>\n" + src
open(path, "w").write(src)
PY
