#!/usr/bin/env bash
# ggml's CPU kernels for get_rows, set_rows and add_id abort the process
# (GGML_ASSERT) on an out-of-range row id, and mul_mat_id only has a debug
# assert (release builds would write out of bounds). Ids are data, often
# computed by the graph itself (MoE routing), so ggml-rs cannot always check
# them before compute. This patch makes those kernels skip the row and mark
# the node with flag bit 30 (GGML_RS_FLAG_BAD_ROW_ID); after compute, ggml-rs
# looks for the mark in its own graph, clears it and fails the compute with
# an error naming the op. Marking the node (not a global counter) keeps
# concurrent computes from blaming each other.
# Usage: 03-cpu-row-id-errors.sh GGML_DIR   (idempotent)
set -euo pipefail
d="$1/src/ggml-cpu"
python3 - "$d" <<'PY'
import sys
d = sys.argv[1]
MARK = "ggml-rs patch: row id errors"
HELPER = ("static inline void ggml_rs_mark_bad_row_id(struct ggml_tensor * t) { "
          "__atomic_fetch_or(&t->flags, 1 << 30, __ATOMIC_RELAXED); } // " + MARK)

def patch(name, pairs):
    path = d + "/" + name
    src = open(path).read()
    if MARK in src:
        return
    for old, new in pairs:
        if old not in src:
            sys.exit("03-cpu-row-id-errors: pattern not found in %s: %s" % (name, old))
        src = src.replace(old, new)
    # At the very top (ggml.h is include-guarded), outside any #if block.
    open(path, "w").write('#include "ggml.h" // ' + MARK + "\n" + HELPER + "\n" + src)

def skip(cond, node="dst"):
    return "if (!(%s)) { ggml_rs_mark_bad_row_id(%s); continue; }" % (cond, node)

patch("ops.cpp", [
    ("GGML_ASSERT(i11 >= 0 && i11 < ne11);", skip("i11 >= 0 && i11 < ne11")),
    ("GGML_ASSERT(i01 >= 0 && i01 < ne01);", skip("i01 >= 0 && i01 < ne01")),
    ("GGML_ASSERT(i1 >= 0 && i1 < ne1);", skip("i1 >= 0 && i1 < ne1")),
])
patch("ggml-cpu.c", [("assert(i02 >= 0 && i02 < n_as);", skip("i02 >= 0 && i02 < n_as"))])
patch("repack.cpp", [("GGML_ASSERT(i02 >= 0 && i02 < n_as);", skip("i02 >= 0 && i02 < n_as", "op"))])
PY
for f in ops.cpp ggml-cpu.c repack.cpp; do grep -q "ggml-rs patch: row id errors" "$d/$f"; done
