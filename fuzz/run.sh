#!/usr/bin/env bash
# Runs the GGUF fuzzer for a while on several cores, each process with its
# own mutation sequence. Usage: fuzz/run.sh [seconds=600] [processes=nproc]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-600}
procs=${2:-$(nproc)}
cargo test --release --test gguf_fuzz --no-run
bin=$(cargo test --release --test gguf_fuzz --no-run --message-format=json 2>/dev/null |
  sed -n 's/.*"executable":"\([^"]*gguf_fuzz[^"]*\)".*/\1/p' | tail -1)
logs=target/tmp/gguf-fuzz-logs
mkdir -p "$logs"
pids=()
for i in $(seq 1 "$procs"); do
  seed=$(( $(date +%s) * 1000 + i ))
  GGML_RS_FUZZ_SECS=$secs GGML_RS_FUZZ_SEED=$seed "$bin" --nocapture >"$logs/$seed.log" 2>&1 &
  pids+=("$!:$seed")
done
status=0
for p in "${pids[@]}"; do
  if wait "${p%%:*}"; then
    grep -h "gguf fuzz:" "$logs/${p#*:}.log" || true
  else
    echo "FAILED: seed ${p#*:}, log $logs/${p#*:}.log"; status=1
  fi
done
exit $status
