#!/usr/bin/env bash
# The reference's unfused gated delta net. On the CPU the pinned llama.cpp
# always runs the hybrids' delta rule through ggml's fused GATED_DELTA_NET
# kernel (cparams.fused_gdn_ar/ch are set true, and no probe turns them off),
# although it has the unfused graphs too (build_delta_net_chunking for
# prompts, build_delta_net_autoregressive for one token), which other
# backends take. Our primitive delta-net path (-delta-net primitive) is the
# counterpart of those graphs, so the golden files hold the reference's
# logits on that path as well: with LLAMA_REF_UNFUSED_GDN set in its
# environment, the context takes the unfused graphs. Unset, nothing changes.
# Only the reference (tools/llama-ref) is built from this tree.
# Usage: 01-ref-unfused-gdn.sh LLAMA_CPP_DIR
set -euo pipefail
f="$1/src/llama-context.cpp"
python3 - "$f" <<'PY'
import sys
path = sys.argv[1]
src = open(path).read()
old = "    cparams.fused_gdn_ar = true;\n    cparams.fused_gdn_ch = true;\n"
new = ("    // ggml-rs patch: LLAMA_REF_UNFUSED_GDN selects the unfused delta net.\n"
       "    cparams.fused_gdn_ar = getenv(\"LLAMA_REF_UNFUSED_GDN\") == nullptr;\n"
       "    cparams.fused_gdn_ch = getenv(\"LLAMA_REF_UNFUSED_GDN\") == nullptr;\n")
if src.count(old) != 1:
    sys.exit(f"{path}: the fused_gdn initialisation is not where this patch expects it")
open(path, "w").write(src.replace(old, new))
PY
grep -q "ggml-rs patch: LLAMA_REF_UNFUSED_GDN" "$f"
