#!/usr/bin/env bash
# The ops of each generated model that ggml's scheduler leaves on the CPU
# although every layer is on the Vulkan device: the ops the device refuses
# (supports_op false) or cannot take its sources for. Reads ggml's own
# assignment log (GGML_SCHED_DEBUG=2, the runner's -v) of a prompt of 39
# tokens (past ggml's op-offload threshold of 32) and one decode step, with
# flash attention on. The first split (the token embeddings' get_rows,
# which stay in CPU memory by design) is left out.
#
#   scripts/vulkan-refused.sh RUNNER MODEL...
#   (RUNNER: built with -tags ggml_vulkan; GGML_VK_VISIBLE_DEVICES must name
#   a CPU-type device such as llvmpipe)
set -euo pipefail
runner=${1:?usage: scripts/vulkan-refused.sh RUNNER MODEL...}
shift
toks=$(seq -s, 3 42)
for m in "$@"; do
  ops=$(GGML_SCHED_DEBUG=2 "$runner" logits -v -fa on -ngl -1 -decode 1 "$m" "$toks" 2>&1 >/dev/null |
    awk '/## SPLIT #/ { split_n = $0; sub(/.*## SPLIT #/, "", split_n); sub(/:.*/, "", split_n); on_cpu = ($0 ~ /SPLIT #[0-9]+: CPU/) && split_n != "0" }
         on_cpu && /node #/ { s = $0; sub(/.*node #[ 0-9]+\( */, "", s); sub(/\).*/, "", s); print s }' | sort | uniq -c | awk '{printf "%s%s x%s", sep, $2, $1; sep=", "}')
  echo "$(basename "$m" .gguf): ${ops:-none}"
done
