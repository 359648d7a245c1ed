#!/usr/bin/env bash
# Runs a release archive's ggml-rs on an emulated CPU of its level and no
# more (QEMU user mode: x86-64-v2 as Nehalem, SSE4.2 and no AVX; x86-64-v3
# as Haswell, AVX2 and no AVX-512), to show it needs nothing above its
# level: its embeddings there must equal its embeddings on this CPU, bit
# for bit. The native build (go/bin/ggml-rs, -march=native) is run the
# same way first when this CPU has AVX-512, to show the emulator refuses
# what the level lacks (it must die of SIGILL). QEMU does not emulate
# AVX-512, so x86-64-v4 is only run natively.
#
# Usage: scripts/dist-emulated.sh LEVEL ARCHIVE_DIR MODEL
set -euo pipefail
level=$1 dir=$2 model=$3
case $level in
  x86-64-v2) cpu=Nehalem ;;
  x86-64-v3) cpu=Haswell ;;
  *) echo "dist-emulated: $level cannot be emulated (QEMU has no AVX-512); skipped"; exit 0 ;;
esac
command -v qemu-x86_64 >/dev/null || { apt-get update -qq && apt-get install -y -qq qemu-user >/dev/null; } ||
  { echo "dist-emulated: could not install qemu-user" >&2; exit 1; }
root=$(cd "$(dirname "$0")/.." && pwd)
texts=("A man is playing a guitar." "Someone is strumming an acoustic instrument.")
if grep -qw avx512f /proc/cpuinfo && [ -x "$root/go/bin/ggml-rs" ]; then
  if out=$(qemu-x86_64 -cpu $cpu "$root/go/bin/ggml-rs" embed "$model" "${texts[@]}" 2>&1); then
    echo "dist-emulated: the native build ran on an emulated $cpu: the emulator does not enforce the level" >&2; exit 1
  fi
  grep -q SIGILL <<<"$out" || { echo "dist-emulated: the native build failed on $cpu, but not with SIGILL:" >&2; echo "$out" | tail -5 >&2; exit 1; }
  echo "dist-emulated: the native build dies of SIGILL on an emulated $cpu (as it should)"
fi
want=$("$dir/bin/ggml-rs" embed -json "$model" "${texts[@]}" 2>/dev/null)
got=$(qemu-x86_64 -cpu $cpu "$dir/bin/ggml-rs" embed -json "$model" "${texts[@]}" 2>/dev/null)
[ "$got" = "$want" ] || { echo "dist-emulated: $level's embeddings on an emulated $cpu differ from this CPU's" >&2; exit 1; }
echo "dist-emulated: $level's ggml-rs runs on an emulated $cpu, embeddings bit-identical to this CPU's"
