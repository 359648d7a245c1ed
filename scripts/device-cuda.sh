#!/usr/bin/env bash
# Everything this project checks on an NVIDIA GPU, in one call of a few
# minutes, on a machine with no Go, no Rust and no network: it runs what
# `make cuda-bundle` built here and carried in .cuda-bundle/ (the runner and
# llama.cpp's llama-ref built with ggml's CUDA backend for sm_90, the Rust
# GPU tests, the wheels that generate the models). docs/notes/cuda.md says
# how it is built and what each step measures.
#
#   scripts/device-cuda.sh OUT              on the GPU machine, from the repository root
#   scripts/device-cuda.sh --stage          there: keep the carried parts of the bundle
#                                           for the next call (.cuda-bundle/PLAN: a
#                                           call carries at most 64 MiB)
#   scripts/device-cuda.sh --dry-run OUT    here, with no GPU: every step on the CPU,
#                                           small sizes, to check the script end to end
#
# Steps, in order of what matters most (each under its own time limit, its
# log in OUT/logs; a failed step is recorded and the next one runs):
#   setup     unpack the bundle, check its sha256, find the CUDA runtime and
#             cuBLAS that the machine has (libcudart.so.13, libcublas.so.13,
#             libcublasLt.so.13; the driver's libcuda.so.1), ldd the programs
#   devices   nvidia-smi and `ggml-rs devices` (enumeration and memory)
#   models    the generated models (scripts/gen-models.py with the pinned
#             gguf and numpy carried as wheels), byte-identical to this
#             repository's (the parity step checks their sha256)
#   rust      tests/gpu.rs built with the cuda feature: the device and its
#             memory, a split graph against the CPU, placement accounted to
#             the byte against ggml's allocation, cancel
#   parity    scripts/parity-gpu.py: every small model, all layers (fa on
#             and off) and half of them, ours against llama.cpp on the GPU
#   fit       `inspect`'s memory for the GPU (fit mode: nothing allocated)
#             against what the process really holds (nvidia-smi), per model
#   place     -ngl all / half / 0 and -cpu-moe on the MoE bench model: speed,
#             and the logits of each placement against all layers on the GPU
#   bench     scripts/bench.py: pp512/tg128, ours and llama.cpp alternating
#   spec      scripts/bench-spec.py: oracle drafts at 0/50/80/100% and MTP
#   serve     scripts/bench-serve.py (ours): 1, 4 and 8 clients
# OUT gets summary.md (every table), steps.tsv and logs.tar.gz (the logs,
# parity.json, and golden-cuda/: llama.cpp's logits on this GPU, for the
# golden files of a later Go test). STEPS="parity bench" runs those alone
# (setup always runs). BUDGET (seconds, default 540) bounds the whole run.
set -uo pipefail
# Every variable is exported: the steps run under timeout(1) in a child
# bash, with this script's functions (export -f).
set -a
cd "$(dirname "$0")/.."
dry=0
bundle=${GGML_RS_CUDA_BUNDLE:-$PWD/.cuda-bundle}
work=${GGML_RS_CUDA_WORK:-/tmp/ggml-rs-cuda}
# Parts carried by earlier calls, kept outside the working tree.
stage=${GGML_RS_CUDA_STAGE:-/tmp/ggml-rs-cuda-stage}
if [ "${1:-}" = "--stage" ]; then
  mkdir -p "$stage" && cp -r "$bundle"/part* "$stage"/ && du -sh "$stage"/part* && exit 0
  exit 1
fi
if [ "${1:-}" = "--dry-run" ]; then dry=1; shift; fi
out=${1:?usage: scripts/device-cuda.sh [--dry-run] OUT}
mkdir -p "$out/logs" && out=$(cd "$out" && pwd)
steps=${STEPS:-devices models rust parity fit place bench spec serve}
threads=$(nproc)
: > "$out/steps.tsv"
summary=$out/summary.md
{
  echo "# scripts/device-cuda.sh$([ $dry = 1 ] && echo ' --dry-run (no GPU: the CPU, small sizes)')"
  echo
  echo "$(date -u '+%Y-%m-%d %H:%M:%S UTC'), $(uname -m), $(nproc) CPUs, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)"
  cat "$bundle"/part*/MANIFEST 2>/dev/null | sed -n 's/^# /    /p' | sort -u
} > "$summary"

# step NAME SECONDS COMMAND...: runs it under a time limit, its output in
# logs/NAME.log, its status and time in steps.tsv.
# The whole run ends by BUDGET seconds (default 540: the device tool allows
# 600 a command), so that the summary and the archive are always written:
# a step gets what is left, less 30 s, and is skipped under 20.
budget=${BUDGET:-540}
step() {
  local name=$1 limit=$2; shift 2
  local t0=$SECONDS left=$((budget - SECONDS - 30))
  if [ "$left" -lt 20 ]; then
    printf '%s\tskipped\t0\n' "$name" >> "$out/steps.tsv"
    echo "== $name: skipped (the run's time budget is spent)"
    return 125
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  echo "== $name (at most ${limit}s)"
  if declare -F "$1" > /dev/null; then
    export -f "$1" run_py bench_models tps 2>/dev/null
    timeout -k 10 "$limit" bash -c '"$@"' _ "$@" > "$out/logs/$name.log" 2>&1
  else
    timeout -k 10 "$limit" "$@" > "$out/logs/$name.log" 2>&1
  fi
  local rc=$?
  printf '%s\t%s\t%s\n' "$name" "$rc" "$((SECONDS - t0))" >> "$out/steps.tsv"
  echo "   $name: exit $rc in $((SECONDS - t0))s$([ $rc = 124 ] && echo ' (time limit)')"
  tail -3 "$out/logs/$name.log" | sed 's/^/   | /'
  return $rc
}
want() { [[ " $steps " == *" $1 "* ]]; }
section() { printf '\n## %s\n\n' "$1" >> "$summary"; }

# --- setup -------------------------------------------------------------------
setup() {
  set -e
  rm -rf "$work" && mkdir -p "$work/bin" "$work/models" "$work/wheels"
  # The parts carried now, then those staged by earlier calls (a staged
  # part that was carried again is the older copy: skipped).
  local parts=$(ls -d "$bundle"/part* 2>/dev/null) d
  for d in $(ls -d "$stage"/part* 2>/dev/null); do
    [ -d "$bundle/$(basename "$d")" ] || parts="$parts $d"
  done
  echo "parts: $parts"
  for d in $parts; do
    for f in "$d"/bin/*.xz; do
      [ -f "$f" ] && xz -dc "$f" > "$work/bin/$(basename "$f" .xz)"
    done
    cp "$d"/wheels/*.whl "$work/wheels/" 2>/dev/null || true
    if [ -s "$d/SHA256SUMS" ]; then (cd "$work/bin" && sha256sum -c "$d/SHA256SUMS"); fi
  done
  for p in ggml-rs llama-ref; do [ -f "$work/bin/$p" ] || { echo "no $p in the bundle's parts"; return 1; }; done
  chmod +x "$work"/bin/*
  # The CUDA runtime and cuBLAS: the machine's own (its CUDA install, then
  # its Python's nvidia-* packages); in a dry run the toolkit's wheels here.
  local dirs="${GGML_RS_CUDA_LIBS:-} /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/lib/x86_64-linux-gnu"
  dirs="$dirs $(python3 -c 'import site,glob; print(" ".join(d for s in site.getsitepackages() for d in glob.glob(s+"/nvidia/*/lib")))' 2>/dev/null)"
  dirs="$dirs $(ls -d /opt/*/.venv/lib/python3*/site-packages/nvidia/*/lib 2>/dev/null | tr '\n' ' ')"
  local path=""
  for so in libcudart.so.13 libcublas.so.13 libcublasLt.so.13; do
    local hit=""
    for d in $dirs; do
      if [ -e "$d/$so" ]; then hit=$d; break; fi
    done
    [ -n "$hit" ] || { echo "no $so in: $dirs"; return 1; }
    echo "$so: $hit"
    [[ ":$path:" == *":$hit:"* ]] || path=$path:$hit
  done
  # A dry run has no driver: the toolkit's link stub stands in (every
  # call fails, so CUDA lists no device and everything runs on the CPU).
  if [ $dry = 1 ] && [ -e "${path##*:}/stubs/libcuda.so.1" ]; then path=$path:${path##*:}/stubs; fi
  echo "LD_LIBRARY_PATH=${path#:}" > "$work/env"
  export LD_LIBRARY_PATH=${path#:}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  for p in "$work"/bin/*; do
    echo "ldd $(basename "$p"):"; ldd "$p" | grep -E 'cuda|cublas|not found' || true
  done
  if [ $dry = 0 ] && ldd "$work"/bin/* | grep 'not found'; then return 1; fi
  # The wheels: gguf and numpy as this repository pins them (the models
  # must be byte-identical). In a dry run the models' venv here.
  if [ $dry = 1 ]; then
    echo "PY=$PWD/.cache/py/bin/python" >> "$work/env"
  else
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$work/site" "$work"/wheels/*.whl
    echo "PY=python3" >> "$work/env"
    echo "PYTHONPATH=$work/site" >> "$work/env"
  fi
  cat "$work/env"
}
if ! step setup 120 setup; then
  echo "setup failed: see $out/logs/setup.log" | tee -a "$summary"
  tar -C "$out" -czf "$out/logs.tar.gz" logs; exit 1
fi
export $(grep -E '^(LD_LIBRARY_PATH|PYTHONPATH)=' "$work/env")
PY=$(sed -n 's/^PY=//p' "$work/env")
run_py() { "$PY" "$@"; }
ours=$work/bin/ggml-rs ref=$work/bin/llama-ref models=$work/models
ngl_all=999
if [ $dry = 1 ]; then ngl_all=0; fi

# --- the device --------------------------------------------------------------
if want devices; then
  devices() {
    if [ $dry = 0 ]; then nvidia-smi; nvidia-smi --query-gpu=name,memory.total,memory.free,driver_version,clocks.max.sm --format=csv; fi
    "$ours" devices
  }
  step devices 60 devices
  section "Devices"
  { echo '```'; grep -v '^$' "$out/logs/devices.log" | tail -12; echo '```'; } >> "$summary"
fi

# --- models ------------------------------------------------------------------
# Small: every parity model. Bench: the bench and speculative rows (dry run:
# two of them).
SMALL_ARCHS="llama qwen2 qwen3 qwen3moe gpt-oss qwen3next qwen35 qwen35moe gemma3 gemma2 olmo2 olmo3 mistral3 lfm2 lfm2moe deepseek2 deepseek2mha glm4moelite llama4 nemotron_h nemotron_h_moe gemma3n"
BENCH="qwen3:q8_0,q4_0,f16 llama:q8_0,q4_0 qwen2:q8_0 qwen35moe:q8_0,q4_0 qwen35:q8_0,q4_0 gpt-oss:q8_0 gemma2:q8_0 olmo3:q8_0 mistral3:q8_0 lfm2:q8_0 lfm2moe:q8_0 deepseek2:q8_0 llama4:q8_0 nemotron_h:q8_0 nemotron_h_moe:q8_0 gemma3n:q8_0"
if [ $dry = 1 ]; then BENCH="qwen3:q4_0 qwen35moe:q8_0"; fi
if want models; then
  gen() {
    {
      for a in $SMALL_ARCHS; do
        t=f16,q8_0,q4_0
        case $a in qwen3next|qwen35|qwen35moe) t=$t,f32 ;; esac
        echo "--size small --arch $a --types $t"
      done
      for b in $BENCH; do echo "--size bench --arch ${b%%:*} --types ${b#*:}"; done
    } | xargs -P "$threads" -I{} sh -c "$PY scripts/gen-models.py -o $models {}"
    ls "$models" | wc -l
  }
  step models 240 gen
fi
# The bench models' paths, from BENCH (arch:type,type ...).
bench_models() {
  for b in $BENCH; do
    for t in $(echo "${b#*:}" | tr , ' '); do echo "$models/${b%%:*}-bench-$t.gguf"; done
  done
}
# tps KIND: the mean t/s of ggml-rs bench's row pp<N> or tg<N> on stdin.
tps() { awk -F'|' -v k="$1" '$0 ~ "\\| *"k"[0-9]+ *\\|" {split($(NF-1), v, "±"); gsub(/ /, "", v[1]); print v[1]; exit}'; }

# --- Rust tests on the device --------------------------------------------------
if want rust && [ -x "$work/bin/gpu-test" ]; then
  if [ $dry = 1 ]; then
    echo "rust: skipped in a dry run (the tests need the GPU)" > "$out/logs/rust.log"
  else
    step rust 120 "$work/bin/gpu-test" --test-threads 1 --nocapture
  fi
  section "Rust tests (tests/gpu.rs, cuda feature)"
  { echo '```'; grep -E '^test |test result|panicked|device:' "$out/logs/rust.log" | head -20; echo '```'; } >> "$summary"
fi

# --- parity ------------------------------------------------------------------
if want parity; then
  pargs=(--ours "$ours" --ref "$ref" --models "$models" --out "$out" -j 8 -t 4)
  if [ $dry = 1 ]; then pargs+=(--dry-run -j 2 -t 1 --only qwen3-small-q8_0,qwen35moe-small-q4_0,gemma3-small-f16); fi
  step parity 240 run_py scripts/parity-gpu.py "${pargs[@]}" --device "$("$ours" devices 2>/dev/null | grep -m1 CUDA || echo CUDA)"
  section "Parity: ours against llama.cpp on the same GPU"
  cat "$out/parity.md" >> "$summary" 2>/dev/null || echo "(no table: see logs/parity.log)" >> "$summary"
fi

# --- fit mode against real allocation ------------------------------------------
# inspect sizes the weights, cache and graph per device without allocating;
# the process's real use is nvidia-smi's per-process figure while a bench
# runs (it includes the CUDA context and cuBLAS's workspace, which inspect
# does not count: the difference is reported, not judged).
if want fit; then
  fit() {
    local gpu=CUDA
    [ $dry = 1 ] && gpu=CPU
    printf '| model | -ctx | inspect: weights and cache on %s | nvidia-smi: the process |\n|---|---:|---:|---:|\n' "$gpu"
    for m in $(bench_models); do
      [ -f "$m" ] || continue
      local pred=$("$ours" inspect -ngl -1 -ctx 4096 "$m" 2>/dev/null | awk -v dev="$gpu" '/^memory per device/ {on=1; next} on && $1 ~ dev {print $(NF-1), $NF; exit}')
      local peak=0
      if [ $dry = 0 ]; then
        "$ours" bench -p 512 -n 16 -r 1 -ctx 4096 "$m" > /dev/null 2>&1 &
        local pid=$!
        while kill -0 $pid 2>/dev/null; do
          local u=$(nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits 2>/dev/null | awk -F', ' -v p=$pid '$1 == p {print $2}')
          [ -n "$u" ] && [ "$u" -gt "$peak" ] && peak=$u
          sleep 0.1
        done
        wait $pid
      fi
      echo "| $(basename "$m" .gguf) | 4096 | ${pred:-?} | $peak MiB |"
    done
  }
  step fit 120 fit
  section "Fit mode: inspect's prediction against the process's GPU memory"
  grep '^|' "$out/logs/fit.log" >> "$summary"
fi

# --- placement: -ngl and -cpu-moe ------------------------------------------------
if want place; then
  place() {
    local m=$models/qwen35moe-bench-q8_0.gguf
    local blocks=$("$ours" inspect "$m" | sed -n 's/^layers (\([0-9]*\)).*/\1/p')
    local toks=$(seq 3 70)
    local p_n="-p 512 -n 128 -r 2"
    [ $dry = 1 ] && p_n="-p 16 -n 4 -r 1"
    "$ours" logits -ngl $ngl_all "$m" $toks > "$work/place-all.json" || return 1
    printf '| placement | pp t/s | tg t/s | logits max|d| against all layers on the GPU |\n|---|---:|---:|---:|\n'
    local placements=("-ngl $ngl_all" "-ngl $(( (blocks + 1) / 2 ))" "-ngl $ngl_all -cpu-moe" "-ngl $ngl_all -n-cpu-moe $(( blocks / 2 ))" "-ngl 0")
    [ $dry = 1 ] && placements=("-ngl 0")
    for p in "${placements[@]}"; do
      "$ours" logits $p "$m" $toks > "$work/place.json" || { echo "| $p | failed | | |"; continue; }
      local d=$(run_py -c "import json; a=json.load(open('$work/place-all.json'))['logits']; b=json.load(open('$work/place.json'))['logits']; print('%.2e' % max(abs(x-y) for x,y in zip(a,b)))")
      "$ours" bench $p $p_n -threads "$threads" "$m" > "$work/place-bench.txt" 2>&1
      echo "| $p | $(tps pp < "$work/place-bench.txt") | $(tps tg < "$work/place-bench.txt") | $d |"
    done
  }
  step place 150 place
  section "Placement on the Qwen3.5 MoE bench model (Q8_0)"
  grep '^|' "$out/logs/place.log" >> "$summary"
fi

# --- speed ---------------------------------------------------------------------
if want bench; then
  bargs=(-p 512 -n 128 -r 2 --rounds 1 -t "$threads" --ngl $ngl_all --timeout 60)
  [ $dry = 1 ] && bargs=(-p 32 -n 8 -r 1 --rounds 1 -t 2 --timeout 120)
  step bench 240 run_py scripts/bench.py "${bargs[@]}" --ours "$ours" --ref "$ref" $(bench_models)
  section "Speed: ours against llama.cpp, both on the GPU"
  grep -E '^\||^[a-z].*:' "$out/logs/bench.log" >> "$summary"
fi
if want spec; then
  sargs=(-n 128 -p 32 --draft 3 --rounds 1 -t "$threads" --ngl $ngl_all --timeout 90)
  [ $dry = 1 ] && sargs=(-n 8 -p 8 --draft 3 --rounds 1 -t 2 --timeout 300)
  step spec 150 run_py scripts/bench-spec.py "${sargs[@]}" --ours "$ours" --ref "$ref" $(ls "$models"/qwen35*-bench-q*.gguf | head -$([ $dry = 1 ] && echo 1 || echo 4))
  section "Speculative decoding (oracle drafts, MTP), ours and llama.cpp on the GPU"
  grep -E '^\|' "$out/logs/spec.log" >> "$summary"
fi
if want serve; then
  vargs=(-parallel 8 -n 64 -c 1,4,8 -rounds 2 -t "$threads")
  [ $dry = 1 ] && vargs=(-parallel 2 -n 4 -c 1,2 -rounds 1 -t 2)
  step serve 120 run_py scripts/bench-serve.py "${vargs[@]}" -servers ours -ours "$ours" "$models/qwen3-bench-q4_0.gguf"
  section "Serve: aggregate generation at 1, 4 and 8 clients (qwen3 bench Q4_0)"
  grep -E '^\||^[a-z].*:' "$out/logs/serve.log" >> "$summary"
fi

section "Steps"
{ printf '| step | exit | seconds |\n|---|---:|---:|\n'; awk -F'\t' '{printf "| %s | %s | %s |\n", $1, $2, $3}' "$out/steps.tsv"; } >> "$summary"
tar -C "$out" -czf "$out/logs.tar.gz" logs $(cd "$out" && ls -d parity.json golden-cuda 2>/dev/null)
rm -rf "$out/logs" "$out/golden-cuda" "$out/parity.json" "$out/parity.md"
echo "device-cuda: $summary"
awk -F'\t' '$2 != 0 {bad=1} END {exit bad}' "$out/steps.tsv"
