#!/usr/bin/env bash
# Q8_0, Q5_0, Q4_0, Q4_1 and Q4_K weights repacked 16 rows at a time, with
# AVX-512 VNNI kernels for MUL_MAT and MUL_MAT_ID (issue 27: three quarters
# of the hybrid MoE prefill was Q8_0 products, SmolLM2's real weights are
# Q4_1, Gemma 3's Q5_0 and Q4_K, and ggml's x86 path takes each weight row
# against each activation row or widens byte products to 16 bits).
# The kernels are ours, in 13-cpu-r16.inc beside this script, which says
# how they work; this script copies it next to ggml-cpu/repack.cpp and
# makes repack.cpp's choice of layout offer it first for those types.
# Where the compiler does not target AVX-512 VNNI the file compiles to
# nothing and nothing changes. Weights the loader marks for the fast kernels
# (-fast-kernels) may take kernels that round differently (the .inc says
# which); unmarked weights keep ggml's floats.
#
# Ours only: scripts/fetch-llama.sh leaves it out of the llama.cpp
# reference, whose speed and numbers stay upstream's.
# Usage: 13-cpu-r16.sh GGML_DIR   (idempotent)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cp "$here/13-cpu-r16.inc" "$1/src/ggml-cpu/ggml-rs-r16.inc"
python3 - "$1/src/ggml-cpu/repack.cpp" <<'PY'
import sys

MARK = "ggml-rs patch 13-cpu-r16"
path = sys.argv[1]
src = open(path).read()
if MARK in src:
    sys.exit(0)
head = "static const ggml::cpu::tensor_traits * ggml_repack_get_optimal_repack_type(const struct ggml_tensor * cur) {\n"
n = src.count(head)
if n != 1:
    sys.exit(f"13-cpu-r16: expected one match in {path}, found {n}")
src = src.replace(head,
    f'#include "ggml-rs-r16.inc" // {MARK}\n\n' + head +
    f"#ifdef GGML_RS_R16 // {MARK}\n"
    "    if (const auto * t = ggml_rs_r16::traits_for(cur)) {\n"
    "        return t;\n"
    "    }\n"
    "#endif\n")

# GET_ROWS of a matrix our kernels repacked (tied embeddings, read by the
# input's get_rows and the output head's matmul): offered by the repack
# buffer type and computed by our traits.
tail = '''        }
        return false;
    }

    ggml::cpu::tensor_traits * get_tensor_traits(const struct ggml_tensor * op) override {
        if (op->op == GGML_OP_MUL_MAT || op->op == GGML_OP_MUL_MAT_ID) {'''
n = src.count(tail)
if n != 1:
    sys.exit(f"13-cpu-r16: expected one supports_op end in {path}, found {n}")
src = src.replace(tail, f'''        }}
#ifdef GGML_RS_R16 // {MARK}: rows of our repacked matrices
        if (ggml_rs_r16::takes_get_rows(op, ggml_backend_cpu_repack_buffer_type())) {{
            return true;
        }}
#endif
        return false;
    }}

    ggml::cpu::tensor_traits * get_tensor_traits(const struct ggml_tensor * op) override {{
#ifdef GGML_RS_R16 // {MARK}
        if (ggml_rs_r16::takes_get_rows(op, ggml_backend_cpu_repack_buffer_type())) {{
            return (ggml::cpu::tensor_traits *) op->src[0]->extra;
        }}
#endif
        if (op->op == GGML_OP_MUL_MAT || op->op == GGML_OP_MUL_MAT_ID) {{''')
# Writes of whole 16-row groups into a tensor our kernels hold (a loader's
# pieces), and the query that tells a loader the group size: 0 where the
# kernels are not built or do not hold the tensor, so the buffer keeps
# ggml's whole-tensor rule.
head = '''static void ggml_backend_cpu_repack_buffer_set_tensor(ggml_backend_buffer_t buffer, struct ggml_tensor * tensor,
                                                       const void * data, size_t offset, size_t size) {
'''
n = src.count(head)
if n != 1:
    sys.exit(f"13-cpu-r16: expected one repack set_tensor in {path}, found {n}")
src = src.replace(head, f'''// {MARK}: the bytes of one 16-row group of a tensor our kernels hold, or 0
// (a loader may write such a tensor in pieces of whole groups).
extern "C" size_t ggml_repack_rs_piece_bytes(const struct ggml_tensor * t) {{
#ifdef GGML_RS_R16
    return t->buffer && t->buffer->buft == ggml_backend_cpu_repack_buffer_type() ? ggml_rs_r16::piece_bytes(t) : 0;
#else
    (void) t;
    return 0;
#endif
}}

''' + head + f'''#ifdef GGML_RS_R16 // {MARK}: pieces of whole groups
    if (ggml_rs_r16::set_piece(tensor, data, offset, size)) {{
        return;
    }}
#endif
''')
open(path, "w").write(src)
PY
