#!/usr/bin/env bash
# GCC 12 miscompiles ggml's AMX tile configuration when it is built on the
# stack (only palette_id survives), so the first tile load of a Q8_0 matmul
# with more than one row dies with SIGILL. Keeping the configuration in static
# read-only storage avoids it (same analysis as upstream PR #26954).
# Usage: 01-amx-static-tile-config.sh GGML_DIR
set -euo pipefail
f="$1/src/ggml-cpu/amx/mmq.cpp"
python3 - "$f" <<'PY'
import re, sys
path = sys.argv[1]
src = open(path).read()
start = src.index("    alignas(64) tile_config_t tc = {};")
end_marker = "tc.rows[7] = 16;  tc.colsb[7] = 64;\n"
end = src.index(end_marker, start) + len(end_marker)
replacement = """    // ggml-rs patch: static read-only config (GCC 12 drops the stack stores).
    alignas(64) static const tile_config_t tc = {
        1, 0, {0},
        {64, 64, 32, 32, 64, 64, 64, 64, 0, 0, 0, 0, 0, 0, 0, 0},
        {8, 8, 16, 16, 16, 16, 16, 16, 0, 0, 0, 0, 0, 0, 0, 0},
    };
"""
src = src[:start] + replacement + src[end:]
open(path, "w").write(src)
PY
grep -q "ggml-rs patch: static read-only config" "$f"
