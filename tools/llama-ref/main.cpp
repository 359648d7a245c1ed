// llama-ref: the llama.cpp reference for ggml-rs's parity tests and benchmarks.
//
// Calls only llama.cpp's public API (llama.h, ggml-cpu.h) of the pinned
// sources in .cache/llama.cpp, and for mtp its staging API (src/llama-ext.h,
// as common/speculative.cpp); see tools/llama-ref/CMakeLists.txt.
//
//   llama-ref logits [-all] [-decode N] [-ubatch N] [-t N] [-fa on|off|auto] [-mtp] MODEL TOKEN...
//       JSON {"model","n_vocab","tokens","logits"}: the logits of the last
//       position, or with -all one row per position. The tokens go in one
//       llama_decode; with -decode N, the last N one per llama_decode after
//       the others (as greedy does). -ubatch N: the context's n_ubatch (the
//       physical batch; n_batch stays the whole prompt), so llama.cpp
//       computes the prompt N tokens at a time (default 512).
//   -ngl N (logits, greedy): llama_model_params.n_gpu_layers (default 0:
//       all on the CPU): the last N layers, the output layer counting as
//       one, on the first GPU, as llama.cpp's -ngl. With -fa auto, logits
//       adds "flash_attn": "on" or "off", what llama.cpp resolved auto to
//       (from its log: ggml's supports_op on the devices the layers use).
//   llama-ref logits -seqs [-ubatch N] [-t N] [-fa ...] MODEL SEQ...
//       Each SEQ argument is one sequence (comma-separated ids); all of them
//       go into ONE llama_decode (sequence 0's tokens first, then 1's, ...;
//       positions from 0 in each, seq ids 0..k-1, n_seq_max k), with logits
//       for the last position of each. JSON {"model","n_vocab","sequences":
//       [[ids]...],"logits":[[last row of sequence 0], ...]}.
//   llama-ref greedy [-n 64] [-ubatch N] [-t N] [-fa ...] [-grammar FILE] MODEL TOKEN...
//       JSON {"model","prompt","tokens","decode_s"}: a greedy continuation
//       (argmax of the last position, one token per llama_decode). With
//       -grammar, constrained by the GBNF grammar in FILE as llama.cpp's
//       common sampler does it (the unconstrained pick checked first, the
//       whole vocabulary masked only when the grammar refuses it), ending at
//       an end-of-generation token. decode_s: the time from the prompt's
//       logits to the last token (sampling and decodes), as ggml-rs
//       generate's "decode" line measures it.
//   -early-rows (logits, greedy): llama_set_embeddings_nextn(ctx, false,
//       masked). The pinned llama.cpp's gpt-oss, qwen3next, qwen35 and
//       qwen35moe graphs by default compute the last layer for every
//       position (so that MTP can read each one's hidden state) and keep the
//       output rows only before the output norm; masked, they keep them
//       before the last layer's feed-forward, as its other models do and as
//       ggml-rs does. The same numbers on the CPU (to 5e-6); on a GPU the
//       last layer's products then run through the kernels for one row
//       instead of a batch's, which round differently (1e-2 in the logits
//       on ggml-vulkan: docs/notes/vulkan.md).
//   -mtp (logits, greedy): load the MTP (nextn) layers too
//       (llama_model_params.load_mtp), which checks their names and shapes;
//       the main graph does not use them.
//   llama-ref bench [-p 512] [-n 128] [-r 3] [-ubatch N] [-t N] [-fa ...] [-json] MODEL
//       llama-bench-style pp<p> and tg<n> tokens/s, mean and sd over -r
//       repetitions after one warm-up each: pp decodes a random prompt of p
//       tokens (one llama_decode per n_batch), tg decodes n random tokens one
//       per llama_decode from an empty cache; the KV cache is cleared before
//       each run, and the CPU threads run in one polling threadpool.
//   llama-ref mtp [-draft N] [-t N] [-fa on|off|auto] MODEL TOKEN...
//       The MTP (multi-token prediction, NextN) draft head of a qwen35 or
//       qwen35moe model, run as common/speculative.cpp's draft-mtp does
//       (common_speculative_impl_draft_mtp: process() after the prompt, then
//       draft()). The model is loaded with load_mtp; a target context with
//       llama_set_embeddings_nextn(true, unmasked) and an MTP context
//       (ctx_type LLAMA_CONTEXT_TYPE_MTP, ctx_other the target, n_rs_seq 0,
//       the same n_ctx, flash attention and threads) with
//       llama_set_embeddings_nextn(true, masked). The target decodes the
//       tokens t_0..t_{n-1} (positions 0..n-1) in one llama_process, every
//       row an output, which gives the nextn hidden states h_0..h_{n-1} (the
//       output_norm'd last hidden state). Then the MTP context decodes one
//       batch of n entries: entry k is token t_k at position k with h_{k-1}
//       as its embedding (entry 0 with a zero vector: speculative.cpp's
//       initial pending_h), every entry an output; row k of "mtp_logits"
//       predicts t_{k+1}. With -draft N: x = the argmax of the target's last
//       row ("target_next"); the MTP context decodes (x, position n, h_{n-1})
//       and d_1 = argmax of its logits, then (d_1, n+1, the MTP context's own
//       nextn state of the previous entry) gives d_2, ..., up to d_N (greedy:
//       no p_min cutoff, no sampler). JSON {"model","n_vocab","n_embd",
//       "tokens","mtp_logits":[row per position], and with -draft
//       "target_next","draft":[d_1..d_N],"draft_logits":[row per step]}.
//   llama-ref spec [-p 32] [-n 256] [-draft 3] [-oracle RATE] [-r 3] [-t N] [-fa ...] MODEL
//       Speculative decoding with the MTP head (qwen35, qwen35moe) against
//       plain decoding, greedy, as llama.cpp runs it: the target context
//       with n_rs_seq = -draft (recurrent states of the last tokens kept for
//       rollback) and nextn embeddings, the MTP context as in mtp. The
//       prompt is token i = (i*7919 + 13) mod n_vocab (ggml-rs bench-spec
//       uses the same). Plain: the prompt, then -n tokens one llama_decode
//       each (a context with n_rs_seq 0). Speculative: after the prompt and
//       the MTP context's process() over it, each step drafts -draft tokens
//       with the head (draft(): greedy, no p_min), removes them from the MTP
//       memory, verifies [last, drafts] in one target batch (every row an
//       output), keeps the drafts up to the first whose target argmax
//       differs, rolls the target back (llama_memory_seq_rm: the KV by
//       position, the recurrent states from the kept snapshots) and runs
//       process() over the last token and the kept drafts with their
//       target nextn states. -r rounds alternate plain and speculative
//       after a warm-up of each; the decode phase is timed. JSON
//       {"plain":{"tps","sd"},"spec":{"tps","sd"},"drafted","accepted",
//       "steps","generated","identical"} (identical: the speculative tokens
//       equal plain decoding's in every round). With -oracle RATE the drafts
//       are ggml-rs's speculate.Oracle's instead of the head's (any
//       decoder; no MTP context): plain decoding's own tokens, each right
//       with the probability p that makes the expected acceptance RATE
//       ((p + ... + p^n)/n = RATE, by 60 bisections), else the token id
//       plus one, drawn from splitmix64 seeded with the round number + 1
//       (the warm-up is round 0): the same drafts as ggml-rs bench-spec.
//   llama-ref quantize [-t N] [-pure] [-output-type T] [-token-embedding-type T] FTYPE IN OUT
//       llama_model_quantize with llama_model_quantize_default_params and
//       those fields set: FTYPE is a llama_ftype name as llama-quantize
//       spells it (Q4_K_M, Q8_0, F16, BF16, F32, ...), T a ggml type name
//       (q8_0, f16, ...). The reference of `ggml-rs quantize`.
//   llama-ref embed [-t N] [-fa on|off|auto] MODEL SEQ...
//       JSON {"model","n_vocab","n_embd","sequences","embeddings"}: each SEQ
//       (comma-separated token ids) decoded alone in an embedding context
//       (cparams.embeddings, the model's pooling, the sequence in one
//       ubatch), its pooled embedding (llama_get_embeddings_seq), not
//       normalised.
//   llama-ref tokenize [-special] MODEL TEXT
//       JSON {"model","n_vocab","tokens"}: llama_tokenize of TEXT with a
//       vocab-only load; -special sets add_special and parse_special (what
//       llama.cpp's tools do with a prompt), else neither.
//   llama-ref tokenize -batch FILE MODEL
//       FILE ("-": stdin) holds one text a line, hex-encoded (any bytes, so
//       newlines and invalid UTF-8 pass); JSON {"model","n_vocab","add_bos",
//       "add_eos","results":[{"plain":[...],"special":[...]}, ...]}, or
//       {"error":"..."} for a text llama_tokenize threw on.
//   llama-ref chat [-bos S] [-eos S] TEMPLATE_FILE CONVERSATIONS_JSON
//       Chat templates rendered by llama.cpp's common/chat.cpp as
//       llama-server renders a request; see chat.cpp.
//
// TOKEN arguments may also be comma-separated lists.
#include "llama.h"
#include "ggml-cpu.h"
#include "../src/llama-ext.h"  // staging API (mtp): llama_set_embeddings_nextn, llama_get_embeddings_nextn[_ith]
#include "../common/cli.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <strings.h>
#include <string>
#include <thread>
#include <vector>

namespace {

using refcli::die;
using refcli::json_str;
using refcli::stats;
using refcli::Stats;
using refcli::to_int;

struct Opts {
    std::string cmd, model, text, batch, grammar;
    std::vector<llama_token> tokens;
    std::vector<std::vector<llama_token>> seqs;  // one per TOKEN argument
    bool all = false, json = false, verbose = false, special = false, multi = false, mtp = false, early_rows = false;
    int ngl = 0;
    int threads = 0, n_draft = 0, n_decode = 0, n_pred = 64, n_prompt = 512, n_gen = 128, reps = 3, ubatch = 0;
    double oracle = -1;  // spec: the oracle's acceptance rate (< 0: the MTP head drafts)
    llama_flash_attn_type fa = LLAMA_FLASH_ATTN_TYPE_AUTO;
};


void usage() {
    fprintf(stderr,
            "usage: llama-ref logits [-all] [-decode N] [-ubatch N] [-t N] [-fa on|off|auto] [-mtp] MODEL TOKEN...\n"
            "       llama-ref logits -seqs [-ubatch N] [-t N] [-fa on|off|auto] [-mtp] MODEL SEQ...\n"
            "       llama-ref greedy [-n 64] [-ubatch N] [-t N] [-fa on|off|auto] [-mtp] [-grammar FILE] MODEL TOKEN...\n"
            "       llama-ref bench [-p 512] [-n 128] [-r 3] [-ubatch N] [-t N] [-fa on|off|auto] [-json] MODEL\n"
            "       llama-ref mtp [-draft N] [-t N] [-fa on|off|auto] MODEL TOKEN...\n"
            "       llama-ref spec [-p 32] [-n 256] [-draft 3] [-oracle RATE] [-r 3] [-t N] [-fa on|off|auto] MODEL\n"
            "       llama-ref embed [-t N] [-fa on|off|auto] MODEL SEQ...\n"
            "       llama-ref tokenize [-special] MODEL TEXT\n"
            "       llama-ref quantize [-t N] [-pure] [-output-type T] [-token-embedding-type T] FTYPE IN OUT\n"
            "       llama-ref tokenize -batch FILE MODEL\n"
            "       llama-ref chat [-bos S] [-eos S] TEMPLATE_FILE CONVERSATIONS_JSON\n");
    exit(2);
}


Opts parse(int argc, char ** argv) {
    if (argc < 2) usage();
    Opts o;
    o.cmd = argv[1];
    std::vector<std::string> pos;
    bool rest = false;  // after "--", everything is positional
    for (int i = 2; i < argc; i++) {
        std::string a = argv[i];
        if (rest) { pos.push_back(a); continue; }
        if (a == "--") { rest = true; continue; }
        auto next = [&]() -> const char * { if (i + 1 >= argc) die("%s needs a value", argv[i]); return argv[++i]; };
        if (a == "-all") o.all = true;
        else if (a == "-json") o.json = true;
        else if (a == "-v") o.verbose = true;
        else if (a == "-special") o.special = true;
        else if (a == "-seqs") o.multi = true;
        else if (a == "-mtp") o.mtp = true;
        else if (a == "-early-rows") o.early_rows = true;
        else if (a == "-ubatch") o.ubatch = to_int(next());
        else if (a == "-decode") o.n_decode = to_int(next());
        else if (a == "-draft") o.n_draft = to_int(next());
        else if (a == "-oracle") {
            const char * v = next();
            char * end = nullptr;
            o.oracle = strtod(v, &end);
            if (!*v || *end || o.oracle < 0 || o.oracle > 1) die("-oracle: a rate from 0 to 1, not %s", v);
        }
        else if (a == "-batch") o.batch = next();
        else if (a == "-grammar") o.grammar = next();
        else if (a == "-t") o.threads = to_int(next());
        else if (a == "-ngl") o.ngl = to_int(next());
        else if (a == "-p") o.n_prompt = to_int(next());
        else if (a == "-r") o.reps = to_int(next());
        else if (a == "-n") { int v = to_int(next()); o.n_pred = v; o.n_gen = v; }
        else if (a == "-fa") {
            std::string v = next();
            if (v == "on" || v == "1") o.fa = LLAMA_FLASH_ATTN_TYPE_ENABLED;
            else if (v == "off" || v == "0") o.fa = LLAMA_FLASH_ATTN_TYPE_DISABLED;
            else if (v == "auto") o.fa = LLAMA_FLASH_ATTN_TYPE_AUTO;
            else die("-fa: on, off or auto, not %s", v.c_str());
        } else if (a == "-h" || a == "--help") usage();
        else if (a.size() > 1 && a[0] == '-' && !isdigit((unsigned char) a[1])) die("unknown option %s", a.c_str());
        else pos.push_back(a);
    }
    if (pos.empty()) usage();
    o.model = pos[0];
    if (o.cmd == "tokenize") {
        // The text is taken as it is (it may look like an option or a number).
        if (o.batch.empty() && pos.size() != 2) die("tokenize needs a model and one text (or -batch FILE)");
        if (!o.batch.empty() && pos.size() != 1) die("tokenize -batch takes no text arguments");
        if (pos.size() == 2) o.text = pos[1];
        return o;
    }
    for (size_t i = 1; i < pos.size(); i++) {
        std::string s = pos[i];
        std::vector<llama_token> seq;
        size_t start = 0;
        while (start <= s.size()) {
            size_t comma = s.find(',', start);
            std::string t = s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
            if (!t.empty()) seq.push_back(to_int(t.c_str()));
            if (comma == std::string::npos) break;
            start = comma + 1;
        }
        o.tokens.insert(o.tokens.end(), seq.begin(), seq.end());
        o.seqs.push_back(seq);
    }
    if (o.threads <= 0) o.threads = std::max(1u, std::thread::hardware_concurrency());
    if (o.reps < 1) die("-r must be at least 1");
    if (o.ubatch < 0) die("-ubatch must be positive");
    if (o.ngl < 0) die("-ngl must not be negative");
    if (o.n_draft < 0) die("-draft must not be negative");
    if (o.n_draft && o.cmd != "mtp" && o.cmd != "spec") die("-draft is for mtp and spec");
    if (o.oracle >= 0 && o.cmd != "spec") die("-oracle is for spec");
    if (o.multi) {
        if (o.cmd != "logits") die("-seqs is for logits");
        if (o.all || o.n_decode) die("-seqs takes neither -all nor -decode");
        for (const auto & seq : o.seqs)
            if (seq.empty()) die("-seqs: an empty sequence");
    }
    return o;
}

// What llama.cpp resolved flash attention "auto" to: its context logs
// "... Flash Attention enabled" or "... Flash Attention not supported, set
// to disabled" (llama_context::resolve_fused_ops). Empty until it did.
std::string fa_resolved;

void note_fa(const char * text) {
    std::string t = text;
    if (t.find("Flash Attention enabled") != std::string::npos) fa_resolved = "on";
    else if (t.find("Flash Attention not supported") != std::string::npos) fa_resolved = "off";
}

void quiet_log(ggml_log_level level, const char * text, void *) {
    note_fa(text);
    if (level == GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

void verbose_log(ggml_log_level, const char * text, void *) {
    note_fa(text);
    fputs(text, stderr);
}

// LLAMA_REF_TRACE=1: every node the scheduler computes, printed to stderr
// as it completes, as ggml-rs prints them under GGML_RS_TRACE=1 (op, shape,
// sum and sum of absolute values of its data as f32, name): where two
// programs' graphs first part.
static bool trace_node(struct ggml_tensor * t, bool ask, void *) {
    if (ask) return true;
    const int64_t n = ggml_nelements(t);
    double sum = 0, abs_sum = 0;
    // F32 has no to_float in ggml's type traits: it is read as it is.
    const ggml_to_float_t to_float = ggml_get_type_traits(t->type)->to_float;
    if (ggml_is_contiguous(t) && t->buffer && (to_float || t->type == GGML_TYPE_F32)) {
        std::vector<uint8_t> buf(ggml_nbytes(t));
        std::vector<float> v(n);
        ggml_backend_tensor_get(t, buf.data(), 0, buf.size());
        if (to_float) {
            to_float(buf.data(), v.data(), n);
        } else {
            memcpy(v.data(), buf.data(), buf.size());
        }
        for (float x : v) {
            sum += x;
            abs_sum += std::fabs((double) x);
        }
    }
    fprintf(stderr, "trace %s [%lld,%lld,%lld,%lld] %.6e %.6e %s\n", ggml_op_desc(t), (long long) t->ne[0],
            (long long) t->ne[1], (long long) t->ne[2], (long long) t->ne[3], sum, abs_sum, t->name);
    return true;
}

struct Session {
    llama_model * model = nullptr;
    llama_context * ctx = nullptr;
    ggml_threadpool * tp = nullptr;
    int n_vocab = 0;
    int n_batch = 0;
    llama_context_params cp{};  // the context's parameters (mtp makes a second context alike)

    // n_seq sequences of up to n_ctx tokens each (the KV cache is per
    // sequence, llama.cpp's default); n_batch_ tokens per llama_decode.
    Session(const Opts & o, int n_ctx, int n_batch_, int n_seq = 1) {
        llama_model_params mp = llama_model_default_params();
        mp.n_gpu_layers = o.ngl;
        mp.load_mtp = o.mtp;
        model = llama_model_load_from_file(o.model.c_str(), mp);
        if (!model) die("cannot load %s", o.model.c_str());
        n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
        cp = llama_context_default_params();
        cp.n_ctx = (uint32_t) (std::max(n_ctx, 64) * n_seq);
        n_batch = std::max(n_batch_, 1);
        cp.n_batch = (uint32_t) n_batch;
        cp.n_ubatch = (uint32_t) std::min(n_batch, o.ubatch > 0 ? o.ubatch : 512);
        cp.n_seq_max = (uint32_t) n_seq;
        cp.n_threads = o.threads;
        cp.n_threads_batch = o.threads;
        cp.flash_attn_type = o.fa;
        cp.no_perf = true;
        if (const char * tr = getenv("LLAMA_REF_TRACE"); tr && *tr && strcmp(tr, "0") != 0) {
            cp.cb_eval = trace_node;
        }
        ctx = llama_init_from_model(model, cp);
        if (!ctx) die("cannot create a context for %s", o.model.c_str());
        // -early-rows: no nextn hidden states, so the last layer computes
        // only the output rows (llama_set_embeddings_nextn(false, masked)).
        if (o.early_rows) llama_set_embeddings_nextn(ctx, false, true);
        // As llama-bench: one threadpool for the whole run, polling between
        // graphs for bench. The other commands' workers sleep instead: on a
        // busy machine, polling workers waiting for a descheduled one made a
        // run of a small model take seconds instead of milliseconds (the
        // results are the same: the work is split alike).
        ggml_threadpool_params tpp = ggml_threadpool_params_default(o.threads);
        tpp.poll = o.cmd == "bench" || o.cmd == "spec" ? 50 : 0;
        tp = ggml_threadpool_new(&tpp);
        if (!tp) die("cannot create a threadpool");
        llama_attach_threadpool(ctx, tp, nullptr);
    }
    ~Session() {
        llama_free(ctx);
        ggml_threadpool_free(tp);
        llama_model_free(model);
    }
    void clear() { llama_memory_clear(llama_get_memory(ctx), false); }

    // Decodes tokens in chunks of n_batch; outputs: logits of every position
    // when all, else of the last one only.
    void decode(const std::vector<llama_token> & toks, int pos0, bool all) {
        llama_batch b = llama_batch_init(n_batch, 0, 1);
        for (size_t i = 0; i < toks.size(); i += n_batch) {
            size_t n = std::min(toks.size() - i, (size_t) n_batch);
            b.n_tokens = (int32_t) n;
            for (size_t j = 0; j < n; j++) {
                b.token[j] = toks[i + j];
                b.pos[j] = (llama_pos) (pos0 + i + j);
                b.n_seq_id[j] = 1;
                b.seq_id[j][0] = 0;
                b.logits[j] = all || (i + j == toks.size() - 1);
            }
            int rc = llama_decode(ctx, b);
            if (rc != 0) { llama_batch_free(b); die("llama_decode failed (%s)", std::to_string(rc).c_str()); }
        }
        llama_batch_free(b);
    }
};

void check_tokens(const Opts & o, const Session & s) {
    if (o.tokens.empty()) die("no tokens");
    for (llama_token t : o.tokens)
        if (t < 0 || t >= s.n_vocab) die("token %s out of range", std::to_string(t).c_str());
}

void print_ints(const std::vector<llama_token> & v) {
    printf("[");
    for (size_t i = 0; i < v.size(); i++) printf(i ? ",%d" : "%d", v[i]);
    printf("]");
}

void print_floats(const float * v, int n) {
    printf("[");
    for (int i = 0; i < n; i++) printf(i ? ",%.9g" : "%.9g", v[i]);
    printf("]");
}


// logits -seqs: every sequence in one llama_decode, the last row of each.
int cmd_logits_seqs(const Opts & o) {
    int k = (int) o.seqs.size(), total = 0, longest = 0;
    for (const auto & seq : o.seqs) { total += (int) seq.size(); longest = std::max(longest, (int) seq.size()); }
    Session s(o, longest, total, k);
    check_tokens(o, s);
    llama_batch b = llama_batch_init(total, 0, 1);
    std::vector<int> last(k);
    int j = 0;
    for (int i = 0; i < k; i++) {
        for (size_t p = 0; p < o.seqs[i].size(); p++, j++) {
            b.token[j] = o.seqs[i][p];
            b.pos[j] = (llama_pos) p;
            b.n_seq_id[j] = 1;
            b.seq_id[j][0] = i;
            b.logits[j] = p + 1 == o.seqs[i].size();
        }
        last[i] = j - 1;
    }
    b.n_tokens = total;
    int rc = llama_decode(s.ctx, b);
    llama_batch_free(b);
    if (rc != 0) die("llama_decode failed (%s)", std::to_string(rc).c_str());
    printf("{\"model\":%s,\"n_vocab\":%d,\"sequences\":[", json_str(o.model).c_str(), s.n_vocab);
    for (int i = 0; i < k; i++) {
        if (i) printf(",");
        print_ints(o.seqs[i]);
    }
    printf("],\"logits\":[");
    for (int i = 0; i < k; i++) {
        if (i) printf(",\n");
        print_floats(llama_get_logits_ith(s.ctx, last[i]), s.n_vocab);
    }
    printf("]}\n");
    return 0;
}

int cmd_logits(const Opts & o) {
    if (o.multi) return cmd_logits_seqs(o);
    int n = (int) o.tokens.size();
    Session s(o, n, n);
    check_tokens(o, s);
    if (o.n_decode < 0 || o.n_decode > n) die("-decode: 0 to the number of tokens");
    // The prefill in one batch, then the last n_decode tokens one per decode.
    int prefill = n - o.n_decode;
    std::vector<std::vector<float>> rows;
    auto keep = [&](int i) { const float * l = llama_get_logits_ith(s.ctx, i); rows.emplace_back(l, l + s.n_vocab); };
    if (prefill > 0) {
        s.decode(std::vector<llama_token>(o.tokens.begin(), o.tokens.begin() + prefill), 0, o.all);
        if (o.all) for (int i = 0; i < prefill; i++) keep(i);
        else if (prefill == n) keep(-1);
    }
    for (int i = prefill; i < n; i++) {
        s.decode({o.tokens[i]}, i, true);
        if (o.all || i == n - 1) keep(-1);
    }
    printf("{\"model\":%s,\"n_vocab\":%d,", json_str(o.model).c_str(), s.n_vocab);
    if (o.fa == LLAMA_FLASH_ATTN_TYPE_AUTO && !fa_resolved.empty()) printf("\"flash_attn\":\"%s\",", fa_resolved.c_str());
    printf("\"tokens\":");
    print_ints(o.tokens);
    printf(",\"logits\":");
    if (o.all) printf("[");
    for (size_t i = 0; i < rows.size(); i++) {
        if (i) printf(",\n");
        print_floats(rows[i].data(), s.n_vocab);
    }
    if (o.all) printf("]");
    printf("}\n");
    return 0;
}

// embed: each SEQ (comma-separated ids) alone through an embedding context
// (the model's pooling), as llama-embedding computes it; its pooled
// embedding, not normalised: {"n_vocab", "n_embd", "sequences", "embeddings"}.
int cmd_embed(const Opts & o) {
    int longest = 0;
    for (const auto & seq : o.seqs) {
        if (seq.empty()) die("embed: an empty sequence");
        longest = std::max(longest, (int) seq.size());
    }
    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = o.ngl;
    llama_model * model = llama_model_load_from_file(o.model.c_str(), mp);
    if (!model) die("cannot load %s", o.model.c_str());
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    const int n_embd = llama_model_n_embd(model);
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t) std::max(longest, 64);
    cp.n_batch = cp.n_ubatch = (uint32_t) longest;  // a sequence in one ubatch (non-causal attention)
    cp.n_threads = cp.n_threads_batch = o.threads;
    cp.flash_attn_type = o.fa;
    cp.embeddings = true;
    cp.no_perf = true;
    llama_context * ctx = llama_init_from_model(model, cp);
    if (!ctx) die("cannot create a context for %s", o.model.c_str());
    if (llama_pooling_type(ctx) == LLAMA_POOLING_TYPE_NONE) die("embed: the model has no pooling");
    printf("{\"model\":%s,\"n_vocab\":%d,\"n_embd\":%d,", json_str(o.model).c_str(), n_vocab, n_embd);
    if (o.fa == LLAMA_FLASH_ATTN_TYPE_AUTO && !fa_resolved.empty()) printf("\"flash_attn\":\"%s\",", fa_resolved.c_str());
    printf("\"sequences\":[");
    for (size_t i = 0; i < o.seqs.size(); i++) {
        if (i) printf(",");
        print_ints(o.seqs[i]);
    }
    printf("],\"embeddings\":[");
    for (size_t i = 0; i < o.seqs.size(); i++) {
        const auto & seq = o.seqs[i];
        for (llama_token t : seq)
            if (t < 0 || t >= n_vocab) die("token %s out of range", std::to_string(t).c_str());
        llama_memory_clear(llama_get_memory(ctx), true);
        llama_batch b = llama_batch_init((int32_t) seq.size(), 0, 1);
        for (size_t p = 0; p < seq.size(); p++) {
            b.token[p] = seq[p];
            b.pos[p] = (llama_pos) p;
            b.n_seq_id[p] = 1;
            b.seq_id[p][0] = 0;
            b.logits[p] = true;
        }
        b.n_tokens = (int32_t) seq.size();
        const bool encoder_only = llama_model_has_encoder(model) && !llama_model_has_decoder(model);
        int rc = encoder_only ? llama_encode(ctx, b) : llama_decode(ctx, b);
        llama_batch_free(b);
        if (rc != 0) die("embed: llama_decode failed (%s)", std::to_string(rc).c_str());
        const float * e = llama_get_embeddings_seq(ctx, 0);
        if (!e) die("embed: no pooled embedding");
        if (i) printf(",\n");
        print_floats(e, n_embd);
    }
    printf("]}\n");
    llama_free(ctx);
    llama_model_free(model);
    return 0;
}

int argmax(const float * v, int n) {
    int best = 0;
    for (int i = 1; i < n; i++) if (v[i] > v[best]) best = i;
    return best;
}

int cmd_greedy(const Opts & o) {
    int n = (int) o.tokens.size();
    Session s(o, n + o.n_pred, std::max(n, 1));
    check_tokens(o, s);
    const llama_vocab * vocab = llama_model_get_vocab(s.model);
    llama_sampler * g = nullptr;
    if (!o.grammar.empty()) {
        FILE * f = fopen(o.grammar.c_str(), "rb");
        if (!f) die("cannot open %s", o.grammar.c_str());
        std::string text;
        char buf[4096];
        for (size_t k; (k = fread(buf, 1, sizeof buf, f)) > 0;) text.append(buf, k);
        fclose(f);
        g = llama_sampler_init_grammar(vocab, text.c_str(), "root");
        if (!g) die("llama.cpp refused the grammar in %s", o.grammar.c_str());
    }
    s.decode(o.tokens, 0, false);
    auto t0 = std::chrono::steady_clock::now();
    std::vector<llama_token> out;
    std::vector<llama_token_data> cur;
    for (int i = 0; i < o.n_pred; i++) {
        const float * lg = llama_get_logits_ith(s.ctx, -1);
        llama_token t = argmax(lg, s.n_vocab);
        if (g) {
            llama_token_data one = {t, lg[t], 0.0f};
            llama_token_data_array a1 = {&one, 1, -1, false};
            llama_sampler_apply(g, &a1);
            if (std::isinf(one.logit)) {
                cur.resize(s.n_vocab);
                for (int k = 0; k < s.n_vocab; k++) cur[k] = {k, lg[k], 0.0f};
                llama_token_data_array all = {cur.data(), cur.size(), -1, false};
                llama_sampler_apply(g, &all);
                t = 0;
                for (int k = 1; k < s.n_vocab; k++) if (cur[k].logit > cur[t].logit) t = k;
                if (std::isinf(cur[t].logit)) die("the grammar allows no token");
            }
            llama_sampler_accept(g, t);
        }
        out.push_back(t);
        if (g && llama_vocab_is_eog(vocab, t)) break;
        if (i + 1 < o.n_pred) s.decode({t}, n + i, false);
    }
    double decode_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (g) llama_sampler_free(g);
    printf("{\"model\":%s,\"prompt\":", json_str(o.model).c_str());
    print_ints(o.tokens);
    printf(",\"tokens\":");
    print_ints(out);
    printf(",\"decode_s\":%.6f}\n", decode_s);
    return 0;
}

// mtp: see the header. Mirrors common_speculative_impl_draft_mtp (qwen35,
// qwen35moe: one NextN head, its own KV cache, not shared with the target).
int cmd_mtp(const Opts & o) {
    int n = (int) o.tokens.size();
    Opts om = o;
    om.mtp = true;
    int n_ctx = std::max(64, n + o.n_draft + 8);
    Session s(om, n_ctx, n_ctx);
    check_tokens(o, s);
    if (llama_model_n_layer_nextn(s.model) <= 0) die("%s has no MTP (nextn) layers", o.model.c_str());
    const int n_embd = llama_model_n_embd_out(s.model);

    // The draft context as common_speculative_init_result makes it.
    llama_context_params cpd = s.cp;
    cpd.ctx_type = LLAMA_CONTEXT_TYPE_MTP;
    cpd.n_ctx = llama_n_ctx(s.ctx);
    cpd.n_rs_seq = 0;
    cpd.ctx_other = s.ctx;
    llama_context * dft = llama_init_from_model(s.model, cpd);
    if (!dft) die("cannot create an MTP context for %s", o.model.c_str());
    llama_attach_threadpool(dft, s.tp, nullptr);
    llama_set_embeddings_nextn(s.ctx, true, /*masked*/ false);
    llama_set_embeddings_nextn(dft, true, /*masked*/ true);

    llama_batch_ext * bt = llama_batch_ext_init(s.ctx);
    llama_batch_ext * bd = llama_batch_ext_init(dft);
    auto fail = [&](const char * what, int rc) {
        llama_batch_ext_free(bt);
        llama_batch_ext_free(bd);
        llama_free(dft);
        die(what, std::to_string(rc).c_str());
    };
    // One entry: token at pos (seq 0), an output; embd, if given, its
    // n_embd-wide state (common_batch::add + set_embd).
    auto add = [&](llama_batch_ext * b, llama_token t, llama_pos pos, const float * embd) {
        int32_t idx = llama_batch_ext_add_token(b, 0, t);
        if (idx < 0) fail("llama_batch_ext_add_token failed (%s)", idx);
        llama_pos p[4] = {pos, 0, 0, 0};
        if (!llama_batch_ext_set_pos(b, idx, p)) fail("llama_batch_ext_set_pos failed (%s)", idx);
        if (embd && !llama_batch_ext_set_embd_token(b, idx, {embd, 1, (size_t) n_embd}))
            fail("llama_batch_ext_set_embd_token failed (%s)", idx);
        llama_batch_ext_set_output_logits(b, idx, true);
    };

    // The target: the whole prompt, every row an output.
    for (int k = 0; k < n; k++) add(bt, o.tokens[k], k, nullptr);
    int rc = llama_process(s.ctx, LLAMA_PROCESS_TYPE_DECODE, bt);
    if (rc != 0) fail("llama_process (target) failed (%s)", rc);
    const float * h_tgt = llama_get_embeddings_nextn(s.ctx);
    if (!h_tgt) fail("no nextn embeddings from the target (%s)", 0);
    std::vector<float> h(h_tgt, h_tgt + (size_t) n * n_embd);
    llama_token next = argmax(llama_get_logits_ith(s.ctx, n - 1), s.n_vocab);

    // process(): token t_k with h_{k-1}, t_0 with pending_h = zeros.
    std::vector<float> zeros(n_embd, 0.0f);
    for (int k = 0; k < n; k++) add(bd, o.tokens[k], k, k == 0 ? zeros.data() : h.data() + (size_t) (k - 1) * n_embd);
    rc = llama_process(dft, LLAMA_PROCESS_TYPE_DECODE, bd);
    if (rc != 0) fail("llama_process (MTP) failed (%s)", rc);
    std::vector<std::vector<float>> rows;
    for (int k = 0; k < n; k++) {
        const float * l = llama_get_logits_ith(dft, k);
        rows.emplace_back(l, l + s.n_vocab);
    }

    // draft(): (x, n, h_{n-1}), then each drafted token with the MTP
    // context's own nextn state of the entry before it.
    std::vector<llama_token> drafted;
    std::vector<std::vector<float>> drows;
    std::vector<float> pending(h.end() - n_embd, h.end());
    llama_token last = next;
    for (int i = 0; i < o.n_draft; i++) {
        llama_batch_ext_clear(bd);
        add(bd, last, n + i, pending.data());
        rc = llama_process(dft, LLAMA_PROCESS_TYPE_DECODE, bd);
        if (rc != 0) fail("llama_process (MTP draft) failed (%s)", rc);
        const float * l = llama_get_logits_ith(dft, 0);
        drows.emplace_back(l, l + s.n_vocab);
        last = argmax(l, s.n_vocab);
        drafted.push_back(last);
        const float * hd = llama_get_embeddings_nextn_ith(dft, 0);
        if (!hd) fail("no nextn embeddings from the MTP context (%s)", i);
        pending.assign(hd, hd + n_embd);
    }
    llama_batch_ext_free(bt);
    llama_batch_ext_free(bd);
    llama_free(dft);

    printf("{\"model\":%s,\"n_vocab\":%d,\"n_embd\":%d,\"tokens\":", json_str(o.model).c_str(), s.n_vocab, n_embd);
    print_ints(o.tokens);
    printf(",\"mtp_logits\":[");
    for (size_t i = 0; i < rows.size(); i++) {
        if (i) printf(",\n");
        print_floats(rows[i].data(), s.n_vocab);
    }
    printf("]");
    if (o.n_draft > 0) {
        printf(",\"target_next\":%d,\"draft\":", next);
        print_ints(drafted);
        printf(",\"draft_logits\":[");
        for (size_t i = 0; i < drows.size(); i++) {
            if (i) printf(",\n");
            print_floats(drows[i].data(), s.n_vocab);
        }
        printf("]");
    }
    printf("}\n");
    return 0;
}


// The oracle drafter of ggml-rs's go/model/speculate/oracle.go, step for
// step (the same numbers from the same seed).
struct Oracle {
    const std::vector<llama_token> & tokens;
    double rate;
    int n_vocab;
    uint64_t seed;
    size_t next = 1;  // index in tokens of the token after the last emitted one
    double uniform() {
        seed += 0x9e3779b97f4a7c15ULL;
        uint64_t z = seed;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        z ^= z >> 31;
        return (double) (z >> 11) * (1.0 / 9007199254740992.0);
    }
    double per_token(int n) const {
        if (rate <= 0 || rate >= 1) return std::max(0.0, std::min(1.0, rate));
        double lo = 0, hi = 1;
        for (int it = 0; it < 60; it++) {
            double p = (lo + hi) / 2, s = 0, q = 1;
            for (int i = 0; i < n; i++) { q *= p; s += q; }
            if (s / n < rate) lo = p; else hi = p;
        }
        return (lo + hi) / 2;
    }
    std::vector<llama_token> draft(int n) {
        double p = per_token(n);
        std::vector<llama_token> out;
        for (int i = 0; i < n && next + i < tokens.size(); i++) {
            llama_token t = tokens[next + i];
            if (uniform() >= p) t = (t + 1) % n_vocab;
            out.push_back(t);
        }
        return out;
    }
    void accept(size_t kept) { next += 1 + kept; }
};

// spec: see the header.
int cmd_spec(const Opts & o) {
    Opts om = o;
    const bool oracle = o.oracle >= 0;
    om.mtp = !oracle;
    const int n_draft = o.n_draft > 0 ? o.n_draft : 3;
    const int n_prompt = o.n_prompt, n_gen = o.n_gen;
    if (n_prompt < 1 || n_gen < 1) die("-p and -n must be positive");
    const int n_ctx = n_prompt + n_gen + n_draft + 8;
    Session s(om, n_ctx, std::max(n_ctx, 512));  // plain decoding's context
    if (!oracle && llama_model_n_layer_nextn(s.model) <= 0) die("%s has no MTP (nextn) layers", o.model.c_str());
    const int n_embd = llama_model_n_embd_out(s.model);
    std::vector<llama_token> prompt(n_prompt);
    for (int i = 0; i < n_prompt; i++) prompt[i] = (llama_token) (((long long) i * 7919 + 13) % s.n_vocab);

    llama_context_params cpt = s.cp;
    cpt.n_rs_seq = (uint32_t) n_draft;
    llama_context * tgt = llama_init_from_model(s.model, cpt);
    if (!tgt) die("cannot create a speculative target context for %s", o.model.c_str());
    llama_attach_threadpool(tgt, s.tp, nullptr);
    const bool recurrent = llama_model_is_recurrent(s.model) || llama_model_is_hybrid(s.model);
    if (recurrent && llama_n_rs_seq(tgt) != (uint32_t) n_draft) die("the target context keeps no rollback states (n_rs_seq %s)", std::to_string(llama_n_rs_seq(tgt)).c_str());
    llama_context * dft = nullptr;
    if (!oracle) {
        llama_context_params cpd = s.cp;
        cpd.ctx_type = LLAMA_CONTEXT_TYPE_MTP;
        cpd.n_ctx = llama_n_ctx(tgt);
        cpd.n_rs_seq = 0;
        cpd.ctx_other = tgt;
        dft = llama_init_from_model(s.model, cpd);
        if (!dft) die("cannot create an MTP context for %s", o.model.c_str());
        llama_attach_threadpool(dft, s.tp, nullptr);
        llama_set_embeddings_nextn(tgt, true, /*masked*/ false);
        llama_set_embeddings_nextn(dft, true, /*masked*/ true);
    }
    llama_batch_ext * bt = llama_batch_ext_init(tgt);
    llama_batch_ext * bd = oracle ? nullptr : llama_batch_ext_init(dft);
    auto add = [&](llama_batch_ext * b, llama_token t, llama_pos pos, const float * embd) {
        int32_t idx = llama_batch_ext_add_token(b, 0, t);
        if (idx < 0) die("llama_batch_ext_add_token failed (%s)", std::to_string(idx).c_str());
        llama_pos p[4] = {pos, 0, 0, 0};
        if (!llama_batch_ext_set_pos(b, idx, p)) die("llama_batch_ext_set_pos failed");
        if (embd && !llama_batch_ext_set_embd_token(b, idx, {embd, 1, (size_t) n_embd})) die("llama_batch_ext_set_embd_token failed");
        llama_batch_ext_set_output_logits(b, idx, true);
    };
    auto process = [&](llama_context * c, llama_batch_ext * b, const char * what) {
        int rc = llama_process(c, LLAMA_PROCESS_TYPE_DECODE, b);
        if (rc != 0) die("llama_process (%s) failed", what);
    };
    auto seconds = [](std::chrono::steady_clock::time_point t0) {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };

    // Plain greedy decoding: returns the tokens and the decode phase's t/s.
    auto plain = [&](std::vector<llama_token> & out) {
        s.clear();
        s.decode(prompt, 0, false);
        llama_token t = argmax(llama_get_logits_ith(s.ctx, -1), s.n_vocab);
        out.assign(1, t);
        auto t0 = std::chrono::steady_clock::now();
        while ((int) out.size() < n_gen) {
            s.decode({t}, n_prompt + (int) out.size() - 1, false);
            t = argmax(llama_get_logits_ith(s.ctx, -1), s.n_vocab);
            out.push_back(t);
        }
        return (n_gen - 1) / seconds(t0);
    };
    long drafted = 0, accepted = 0, steps = 0, generated = 0;
    auto spec = [&](std::vector<llama_token> & out, const std::vector<llama_token> & want, int round) {
        Oracle orc{want, o.oracle, s.n_vocab, (uint64_t) round + 1};
        llama_memory_clear(llama_get_memory(tgt), false);
        llama_batch_ext_clear(bt);
        for (int k = 0; k < n_prompt; k++) add(bt, prompt[k], k, nullptr);
        process(tgt, bt, "target prompt");
        llama_token tok = argmax(llama_get_logits_ith(tgt, n_prompt - 1), s.n_vocab);
        std::vector<float> hp, zeros(n_embd, 0.0f), pending, hprev, dh;
        if (!oracle) {
            llama_memory_clear(llama_get_memory(dft), false);
            const float * h = llama_get_embeddings_nextn(tgt);
            if (!h) die("no nextn embeddings from the target");
            hp.assign(h, h + (size_t) n_prompt * n_embd);
            llama_batch_ext_clear(bd);
            for (int k = 0; k < n_prompt; k++) add(bd, prompt[k], k, k == 0 ? zeros.data() : hp.data() + (size_t) (k - 1) * n_embd);
            process(dft, bd, "MTP prompt");
            pending.assign(hp.end() - n_embd, hp.end());
            hprev = pending;
        }
        out.assign(1, tok);
        int cur = n_prompt;  // tok's position
        auto t0 = std::chrono::steady_clock::now();
        while ((int) out.size() < n_gen) {
            const int n = std::min(n_draft, n_gen - (int) out.size());
            // draft(): the head from (tok, its predecessor's target state).
            std::vector<llama_token> d;
            if (oracle) {
                d = orc.draft(n);
            } else {
                llama_token last = tok;
                for (int i = 0; i < n; i++) {
                    llama_batch_ext_clear(bd);
                    add(bd, last, cur + i, pending.data());
                    process(dft, bd, "MTP draft");
                    last = argmax(llama_get_logits_ith(dft, 0), s.n_vocab);
                    d.push_back(last);
                    const float * hd = llama_get_embeddings_nextn_ith(dft, 0);
                    pending.assign(hd, hd + n_embd);
                }
                llama_memory_seq_rm(llama_get_memory(dft), 0, cur, -1);
            }
            const int nd = (int) d.size();
            // Verify [tok, d...] in one batch.
            llama_batch_ext_clear(bt);
            for (int i = 0; i <= nd; i++) add(bt, i == 0 ? tok : d[i - 1], cur + i, nullptr);
            process(tgt, bt, "target verify");
            std::vector<llama_token> kept;
            llama_token next = -1;
            for (int i = 0; i <= nd; i++) {
                llama_token t = argmax(llama_get_logits_ith(tgt, i), s.n_vocab);
                out.push_back(t);
                if (i == nd || t != d[i] || (int) out.size() >= n_gen) { next = t; if (i < nd && t == d[i]) kept.push_back(t); break; }
                kept.push_back(t);
            }
            steps++, drafted += nd, accepted += (long) kept.size();
            // Roll the target back past the rejected drafts.
            if (!llama_memory_seq_rm(llama_get_memory(tgt), 0, cur + 1 + (int) kept.size(), -1)) die("the target cannot roll back");
            if (oracle) {
                orc.accept(kept.size());
            } else {
                // process(): tok with hprev, kept[j] with the target state of the row before.
                const float * h = llama_get_embeddings_nextn(tgt);
                dh.assign(h, h + (size_t) (kept.size() + 1) * n_embd);
                llama_batch_ext_clear(bd);
                for (size_t j = 0; j <= kept.size(); j++)
                    add(bd, j == 0 ? tok : kept[j - 1], cur + (int) j, j == 0 ? hprev.data() : dh.data() + (j - 1) * n_embd);
                process(dft, bd, "MTP process");
                hprev.assign(dh.end() - n_embd, dh.end());
                pending = hprev;
            }
            cur += 1 + (int) kept.size();
            tok = next;
        }
        out.resize(n_gen);
        generated += n_gen - 1;
        return (n_gen - 1) / seconds(t0);
    };

    std::vector<llama_token> want, got;
    std::vector<double> tp, ts;
    bool identical = true;
    for (int r = 0; r <= o.reps; r++) {
        double a = plain(want);
        if (r == 0) drafted = accepted = steps = generated = 0;
        double b = spec(got, want, r);
        if (r == 0) { drafted = accepted = steps = generated = 0; continue; }
        tp.push_back(a), ts.push_back(b);
        identical = identical && got == want;
    }
    llama_batch_ext_free(bt);
    if (bd) llama_batch_ext_free(bd);
    if (dft) llama_free(dft);
    llama_free(tgt);
    Stats p = stats(tp), q = stats(ts);
    printf("{\"model\":%s,\"drafter\":%s,\"threads\":%d,\"draft\":%d,\"n\":%d,\"plain\":{\"tps\":%.3f,\"sd\":%.3f},\"spec\":{\"tps\":%.3f,\"sd\":%.3f},"
           "\"drafted\":%ld,\"accepted\":%ld,\"steps\":%ld,\"generated\":%ld,\"identical\":%s}\n",
           json_str(o.model).c_str(), oracle ? ("\"oracle " + std::to_string((int) std::lround(100 * o.oracle)) + "%\"").c_str() : "\"mtp\"", o.threads, n_draft, n_gen, p.mean, p.sd, q.mean, q.sd, drafted, accepted, steps, generated,
           identical ? "true" : "false");
    return 0;
}

int cmd_bench(const Opts & o) {
    using clk = std::chrono::steady_clock;
    // n_batch as llama-bench's default (2048) covers the prompt in one call.
    Session s(o, o.n_prompt + o.n_gen, std::max(o.n_prompt, 1));
    char desc[256];
    llama_model_desc(s.model, desc, sizeof desc);
    refcli::TokenGen gen;
    auto rnd = [&]() -> llama_token { return gen.next(s.n_vocab); };

    auto run_pp = [&]() {
        std::vector<llama_token> toks(o.n_prompt);
        for (auto & t : toks) t = rnd();
        s.clear();
        auto t0 = clk::now();
        s.decode(toks, 0, false);
        llama_synchronize(s.ctx);
        return std::chrono::duration<double>(clk::now() - t0).count();
    };
    auto run_tg = [&]() {
        s.clear();
        llama_token t = rnd();
        auto t0 = clk::now();
        for (int i = 0; i < o.n_gen; i++) {
            s.decode({t}, i, false);
            llama_synchronize(s.ctx);
            t = rnd();
        }
        return std::chrono::duration<double>(clk::now() - t0).count();
    };

    std::vector<double> pp, tg;
    if (o.n_prompt > 0) {
        run_pp();  // warm-up
        for (int r = 0; r < o.reps; r++) pp.push_back(o.n_prompt / run_pp());
    }
    if (o.n_gen > 0) {
        run_tg();  // warm-up
        for (int r = 0; r < o.reps; r++) tg.push_back(o.n_gen / run_tg());
    }
    const char * fa = o.fa == LLAMA_FLASH_ATTN_TYPE_ENABLED ? "on" : o.fa == LLAMA_FLASH_ATTN_TYPE_DISABLED ? "off" : "auto";
    if (o.json) {
        printf("{\"model\":%s,\"desc\":%s,\"threads\":%d,\"flash_attn\":\"%s\",\"reps\":%d", json_str(o.model).c_str(),
               json_str(desc).c_str(), o.threads, fa, o.reps);
        if (!pp.empty()) { Stats st = stats(pp); printf(",\"pp\":{\"n\":%d,\"tps\":%.3f,\"sd\":%.3f}", o.n_prompt, st.mean, st.sd); }
        if (!tg.empty()) { Stats st = stats(tg); printf(",\"tg\":{\"n\":%d,\"tps\":%.3f,\"sd\":%.3f}", o.n_gen, st.mean, st.sd); }
        printf("}\n");
    } else {
        printf("| %-40s | %7s | %4s | %10s | %20s |\n", "model", "threads", "fa", "test", "t/s");
        auto row = [&](const char * kind, int n, const std::vector<double> & v) {
            Stats st = stats(v);
            std::string test = std::string(kind) + std::to_string(n);
            printf("| %-40s | %7d | %4s | %10s | %11.2f ± %6.2f |\n", desc, o.threads, fa, test.c_str(), st.mean, st.sd);
        };
        if (!pp.empty()) row("pp", o.n_prompt, pp);
        if (!tg.empty()) row("tg", o.n_gen, tg);
    }
    return 0;
}

// Tokenize: a vocab-only load, then llama_tokenize (C++ exceptions from the
// tokenizer, e.g. on a code point above U+10FFFF, become an error).
struct Vocab {
    llama_model * model = nullptr;
    const llama_vocab * vocab = nullptr;
    explicit Vocab(const std::string & path) {
        llama_model_params mp = llama_model_default_params();
        mp.vocab_only = true;
        mp.n_gpu_layers = 0;
        model = llama_model_load_from_file(path.c_str(), mp);
        if (!model) die("cannot load %s", path.c_str());
        vocab = llama_model_get_vocab(model);
    }
    ~Vocab() { llama_model_free(model); }

    bool tokenize(const std::string & text, bool special, std::vector<llama_token> & out, std::string & err) const {
        try {
            out.assign(text.size() + 8, 0);
            int n = llama_tokenize(vocab, text.data(), (int32_t) text.size(), out.data(), (int32_t) out.size(), special, special);
            if (n < 0) {
                out.assign(-n, 0);
                n = llama_tokenize(vocab, text.data(), (int32_t) text.size(), out.data(), (int32_t) out.size(), special, special);
            }
            if (n < 0) { err = "llama_tokenize failed"; return false; }
            out.resize(n);
            return true;
        } catch (const std::exception & e) {
            err = e.what();
            return false;
        }
    }
};

std::string unhex(const std::string & line) {
    std::string out;
    auto val = [](char c) -> int {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        return -1;
    };
    if (line.size() % 2) die("-batch: a line of odd length: %s", line.c_str());
    for (size_t i = 0; i < line.size(); i += 2) {
        int hi = val(line[i]), lo = val(line[i + 1]);
        if (hi < 0 || lo < 0) die("-batch: not hex: %s", line.c_str());
        out.push_back((char) (hi * 16 + lo));
    }
    return out;
}

int cmd_tokenize(const Opts & o) {
    Vocab v(o.model);
    int n_vocab = llama_vocab_n_tokens(v.vocab);
    std::vector<llama_token> ids;
    std::string err;
    if (o.batch.empty()) {
        if (!v.tokenize(o.text, o.special, ids, err)) die("tokenize: %s", err.c_str());
        printf("{\"model\":%s,\"n_vocab\":%d,\"tokens\":", json_str(o.model).c_str(), n_vocab);
        print_ints(ids);
        printf("}\n");
        return 0;
    }
    FILE * f = o.batch == "-" ? stdin : fopen(o.batch.c_str(), "rb");
    if (!f) die("cannot open %s", o.batch.c_str());
    printf("{\"model\":%s,\"n_vocab\":%d,\"add_bos\":%s,\"add_eos\":%s,\"results\":[", json_str(o.model).c_str(), n_vocab,
           llama_vocab_get_add_bos(v.vocab) ? "true" : "false", llama_vocab_get_add_eos(v.vocab) ? "true" : "false");
    std::string line;
    int n = 0;
    for (int c; (c = fgetc(f)) != EOF || !line.empty();) {
        if (c != '\n' && c != EOF) { if (c != '\r') line.push_back((char) c); continue; }
        std::string text = unhex(line);
        line.clear();
        printf(n++ ? ",\n{" : "\n{");
        std::vector<llama_token> plain;
        if (v.tokenize(text, false, plain, err) && v.tokenize(text, true, ids, err)) {
            printf("\"plain\":");
            print_ints(plain);
            printf(",\"special\":");
            print_ints(ids);
        } else {
            printf("\"error\":%s", json_str(err).c_str());
        }
        printf("}");
        if (c == EOF) break;
    }
    printf("]}\n");
    if (f != stdin) fclose(f);
    return 0;
}

// quantize: see the header comment. Parses its own arguments (they are not
// the inference commands').
int cmd_quantize(int argc, char ** argv) {
    static const std::pair<const char *, llama_ftype> ftypes[] = {
        {"F32", LLAMA_FTYPE_ALL_F32}, {"F16", LLAMA_FTYPE_MOSTLY_F16}, {"BF16", LLAMA_FTYPE_MOSTLY_BF16},
        {"Q4_0", LLAMA_FTYPE_MOSTLY_Q4_0}, {"Q4_1", LLAMA_FTYPE_MOSTLY_Q4_1}, {"Q5_0", LLAMA_FTYPE_MOSTLY_Q5_0},
        {"Q5_1", LLAMA_FTYPE_MOSTLY_Q5_1}, {"Q8_0", LLAMA_FTYPE_MOSTLY_Q8_0}, {"Q2_K", LLAMA_FTYPE_MOSTLY_Q2_K},
        {"Q2_K_S", LLAMA_FTYPE_MOSTLY_Q2_K_S}, {"Q3_K_S", LLAMA_FTYPE_MOSTLY_Q3_K_S}, {"Q3_K_M", LLAMA_FTYPE_MOSTLY_Q3_K_M},
        {"Q3_K_L", LLAMA_FTYPE_MOSTLY_Q3_K_L}, {"Q4_K_S", LLAMA_FTYPE_MOSTLY_Q4_K_S}, {"Q4_K_M", LLAMA_FTYPE_MOSTLY_Q4_K_M},
        {"Q5_K_S", LLAMA_FTYPE_MOSTLY_Q5_K_S}, {"Q5_K_M", LLAMA_FTYPE_MOSTLY_Q5_K_M}, {"Q6_K", LLAMA_FTYPE_MOSTLY_Q6_K},
        {"IQ4_NL", LLAMA_FTYPE_MOSTLY_IQ4_NL}, {"IQ4_XS", LLAMA_FTYPE_MOSTLY_IQ4_XS},
    };
    auto ggml_type_named = [](const std::string & n) -> ggml_type {
        for (int t = 0; t < GGML_TYPE_COUNT; t++) {
            const char * name = ggml_type_name((ggml_type) t);
            if (name && strcasecmp(name, n.c_str()) == 0) return (ggml_type) t;
        }
        die("unknown ggml type %s", n.c_str());
        return GGML_TYPE_COUNT;
    };
    llama_model_quantize_params p = llama_model_quantize_default_params();
    p.nthread = 1;
    bool verbose = false;
    std::vector<std::string> pos;
    for (int i = 2; i < argc; i++) {
        std::string a = argv[i];
        auto next = [&]() -> const char * { if (i + 1 >= argc) die("%s needs a value", argv[i]); return argv[++i]; };
        if (a == "-t") p.nthread = to_int(next());
        else if (a == "-pure") p.pure = true;
        else if (a == "-v") verbose = true;
        else if (a == "-output-type") p.output_tensor_type = ggml_type_named(next());
        else if (a == "-token-embedding-type") p.token_embedding_type = ggml_type_named(next());
        else if (a.size() > 1 && a[0] == '-') die("unknown option %s", a.c_str());
        else pos.push_back(a);
    }
    if (pos.size() != 3) die("quantize needs FTYPE IN OUT%s", "");
    bool found = false;
    for (const auto & f : ftypes) {
        if (strcasecmp(f.first, pos[0].c_str()) == 0) { p.ftype = f.second; found = true; }
    }
    if (!found) die("unknown file type %s", pos[0].c_str());
    if (!verbose) llama_log_set(quiet_log, nullptr);
    llama_backend_init();
    uint32_t rc = llama_model_quantize(pos[1].c_str(), pos[2].c_str(), &p);
    llama_backend_free();
    if (rc != 0) die("llama_model_quantize failed (%s)", pos[1].c_str());
    return 0;
}

}  // namespace

int cmd_chat(int argc, char ** argv);  // chat.cpp
int cmd_jinja(int argc, char ** argv); // jinja.cpp
int cmd_schema(int argc, char ** argv); // schema.cpp
int cmd_grammar(int argc, char ** argv);       // grammar.cpp
int cmd_grammar_bench(int argc, char ** argv); // grammar.cpp

int main(int argc, char ** argv) {
    refcli::program = "llama-ref";
    if (argc > 1 && std::string(argv[1]) == "quantize") return cmd_quantize(argc, argv);
    if (argc > 1 && std::string(argv[1]) == "chat") return cmd_chat(argc, argv);
    if (argc > 1 && std::string(argv[1]) == "jinja") return cmd_jinja(argc, argv);
    if (argc > 1 && std::string(argv[1]) == "schema") return cmd_schema(argc, argv);
    if (argc > 1 && std::string(argv[1]) == "grammar") return cmd_grammar(argc, argv);
    if (argc > 1 && std::string(argv[1]) == "grammar-bench") return cmd_grammar_bench(argc, argv);
    Opts o = parse(argc, argv);
    llama_log_set(o.verbose ? verbose_log : quiet_log, nullptr);
    llama_backend_init();
    int rc;
    if (o.cmd == "logits") rc = cmd_logits(o);
    else if (o.cmd == "greedy") rc = cmd_greedy(o);
    else if (o.cmd == "bench") rc = cmd_bench(o);
    else if (o.cmd == "mtp") rc = cmd_mtp(o);
    else if (o.cmd == "spec") rc = cmd_spec(o);
    else if (o.cmd == "tokenize") rc = cmd_tokenize(o);
    else if (o.cmd == "embed") rc = cmd_embed(o);
    else usage();
    llama_backend_free();
    return rc;
}
