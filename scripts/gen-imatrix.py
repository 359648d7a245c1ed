#!/usr/bin/env python3
"""Writes a deterministic importance matrix for a generated model, in
llama.cpp's formats: the GGUF file of llama-imatrix (default) or its legacy
binary format (--legacy).

The fixtures of `ggml-rs quantize -imatrix` tests: the test models are
random, so an imatrix computed from text would be as arbitrary as this one,
and this one exercises what a real one holds without the cost of running
llama-imatrix in `make test` (`make quant-parity` also runs the real
llama-imatrix on the models). For every weight matrix of the model
(2-D and 3-D tensors named *.weight, token_embd excepted) it writes
NAME.in_sum2 (sums of squared activations, log-normal, per expert for the
3-D expert tensors) and NAME.counts (tokens seen per expert: one expert of
each 3-D tensor saw none, which llama-quantize reads as weights of 1), and
a token_embd.weight entry of the wrong length, which llama-quantize ignores
(its exception for the token embeddings). Keys: imatrix.datasets,
imatrix.chunk_count, imatrix.chunk_size as llama-imatrix writes them.

Usage: gen-imatrix.py MODEL.gguf OUT [--legacy] [--seed N]
Needs numpy and gguf (scripts/gen-models-requirements.txt).
"""
import argparse
import struct
import sys

import gguf
import numpy as np

CHUNK_SIZE = 512
CHUNKS = 10


def entries(model_path, seed):
    rng = np.random.default_rng(seed)
    r = gguf.GGUFReader(model_path)
    out = []
    for t in sorted(r.tensors, key=lambda t: t.name):
        shape = [int(x) for x in t.shape]  # ggml order: ne0 first
        if len(shape) < 2 or not t.name.endswith(".weight"):
            continue
        ne0 = shape[0]
        n_mat = shape[2] if len(shape) > 2 else 1
        if t.name == "token_embd.weight":
            ne0 *= 2  # not the tensor's size: llama-quantize skips it
        counts = np.full(n_mat, CHUNKS * CHUNK_SIZE, dtype=np.float32)
        if n_mat > 1:
            counts = rng.integers(1, CHUNKS * CHUNK_SIZE, size=n_mat).astype(np.float32)
            counts[rng.integers(0, n_mat)] = 0
        means = rng.lognormal(0.0, 1.0, size=(n_mat, ne0)).astype(np.float32)
        sums = (means * counts[:, None]).astype(np.float32)
        out.append((t.name, sums, counts))
    return out


def write_gguf(path, ents, dataset):
    w = gguf.GGUFWriter(path, arch="imatrix", use_temp_file=False)
    # llama-imatrix writes general.type = "imatrix" and no architecture key
    w.kv_data[0].pop("general.architecture", None)
    w.add_type("imatrix")
    w.add_array("imatrix.datasets", [dataset])
    w.add_uint32("imatrix.chunk_count", CHUNKS)
    w.add_uint32("imatrix.chunk_size", CHUNK_SIZE)
    for name, sums, counts in ents:
        w.add_tensor(name + ".in_sum2", sums)
        w.add_tensor(name + ".counts", counts.reshape(len(counts), 1))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def write_legacy(path, ents, dataset):
    # legacy: the sums were (sum/count)*ncall; one call count per entry
    with open(path, "wb") as f:
        f.write(struct.pack("<i", len(ents)))
        for name, sums, counts in ents:
            ncall = 7
            vals = (sums / np.maximum(counts, 1)[:, None] * ncall).astype(np.float32).reshape(-1)
            b = name.encode()
            f.write(struct.pack("<i", len(b)) + b)
            f.write(struct.pack("<ii", ncall, vals.size))
            f.write(vals.astype("<f4").tobytes())
        d = dataset.encode()
        f.write(struct.pack("<ii", CHUNKS, len(d)) + d)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("out")
    ap.add_argument("--legacy", action="store_true")
    ap.add_argument("--seed", type=int, default=1234)
    a = ap.parse_args()
    ents = entries(a.model, a.seed)
    if not ents:
        sys.exit(f"{a.model}: no weight matrices")
    dataset = "gen-imatrix.py seed %d" % a.seed
    (write_legacy if a.legacy else write_gguf)(a.out, ents, dataset)


if __name__ == "__main__":
    main()
