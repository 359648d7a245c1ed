// llama-ref grammar: llama.cpp's grammar sampler (llama_sampler_init_grammar)
// on a corpus of GBNF grammars over one vocabulary, the reference of
// go/grammar's golden test.
//
//   llama-ref grammar CORPUS_JSON GGUF NAME            golden masks
//   llama-ref grammar-bench CORPUS_JSON GGUF NAME [REPS]  ns per apply
//
// CORPUS_JSON: {"grammars": [{"name": S, "file": F (relative to the
// corpus) or "text": S, "texts": [S...], "random": N, "steps": N}]}.
// GGUF is loaded vocab-only. For each grammar the sampler is built
// (llama_sampler_init_grammar(vocab, text, "root"); a refusal is
// {"name", "error": true}), then each sequence of tokens is replayed
// through llama_sampler_apply (on all tokens, logit 0) and
// llama_sampler_accept, recording the allowed set before each token and
// after the last: {"n": count, "h": FNV-1a 64 of the ascending ids as
// 4 little-endian bytes each, "ids": [...] when n <= 16}.
// Sequences ("kind"): "random": at each step a token drawn by a seeded
// xorshift from the allowed ones (half the time from those of one-byte
// pieces; an allowed EOG token one time in four, which ends it); "text":
// the tokenization of each sample text (no special tokens), then EOS
// where allowed; "bytes": each sample text that is not ASCII as one
// one-byte-piece token per byte (UTF-8 split across tokens). A token the
// grammar does not allow ends a sequence before it is accepted; an
// exception from accept is recorded as "accept_error" (its step).
// The vocabulary header gives n_vocab, the EOG ids and an FNV-1a 64 of
// the pieces (token_to_piece, special = true; 4-byte length, bytes).
#include "llama.h"
#include "json.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

[[noreturn]] void gdie(const std::string & msg) {
    fprintf(stderr, "llama-ref grammar: %s\n", msg.c_str());
    exit(1);
}

void gquiet(ggml_log_level, const char *, void *) {}

struct Fnv {
    uint64_t h = 1469598103934665603ull;
    void byte(uint8_t b) { h ^= b; h *= 1099511628211ull; }
    void u32(uint32_t v) { for (int i = 0; i < 4; i++) byte((uint8_t) (v >> (8 * i))); }
    std::string hex() const { char b[17]; snprintf(b, sizeof b, "%016llx", (unsigned long long) h); return b; }
};

struct Rng {
    uint64_t s;
    explicit Rng(uint64_t seed) : s(seed ? seed : 0x9e3779b97f4a7c15ull) {}
    uint64_t next() { s ^= s << 13; s ^= s >> 7; s ^= s << 17; return s; }
    size_t below(size_t n) { return (size_t) (next() % n); }
};

struct Ctx {
    const llama_vocab * vocab;
    int n_vocab;
    std::vector<std::string> pieces;
    std::vector<llama_token_data> cur;
};

std::string piece_of(const llama_vocab * vocab, llama_token id) {
    std::string s(64, '\0');
    int n = llama_token_to_piece(vocab, id, &s[0], (int32_t) s.size(), 0, true);
    if (n < 0) {
        s.assign(-n, '\0');
        n = llama_token_to_piece(vocab, id, &s[0], (int32_t) s.size(), 0, true);
    }
    s.resize(n < 0 ? 0 : n);
    return s;
}

// allowed: the tokens apply leaves finite.
std::vector<llama_token> allowed(Ctx & c, llama_sampler * smpl) {
    c.cur.resize(c.n_vocab);
    for (int i = 0; i < c.n_vocab; i++) c.cur[i] = {i, 0.0f, 0.0f};
    llama_token_data_array arr = {c.cur.data(), c.cur.size(), -1, false};
    llama_sampler_apply(smpl, &arr);
    std::vector<llama_token> out;
    for (size_t i = 0; i < arr.size; i++) {
        if (std::isfinite(arr.data[i].logit)) out.push_back(arr.data[i].id);
    }
    std::sort(out.begin(), out.end());
    return out;
}

common_json mask_json(const std::vector<llama_token> & ids) {
    Fnv f;
    for (auto id : ids) f.u32((uint32_t) id);
    common_json m = common_json::object();
    m["n"] = ids.size();
    m["h"] = f.hex();
    if (ids.size() <= 16) m["ids"] = ids;
    return m;
}

// replay: the tokens of seq (or, with pick, the tokens pick chooses from
// each allowed set) through a fresh sampler; records the masks.
template <typename Pick>
common_json replay(Ctx & c, const std::string & text, const char * kind, Pick pick) {
    llama_sampler * smpl = llama_sampler_init_grammar(c.vocab, text.c_str(), "root");
    common_json seq = common_json::object();
    seq["kind"] = kind;
    std::vector<llama_token> toks;
    common_json masks = common_json::array();
    for (int step = 0;; step++) {
        auto ids = allowed(c, smpl);
        masks.push_back(mask_json(ids));
        llama_token t = pick(step, ids);
        if (t < 0) break;
        if (!std::binary_search(ids.begin(), ids.end(), t)) {
            seq["stopped"] = "token " + std::to_string(t) + " not allowed";
            break;
        }
        toks.push_back(t);
        try {
            llama_sampler_accept(smpl, t);
        } catch (const std::exception & e) {
            seq["accept_error"] = step;
            break;
        }
        if (llama_vocab_is_eog(c.vocab, t)) break;
    }
    llama_sampler_free(smpl);
    seq["tokens"] = toks;
    seq["masks"] = masks;
    return seq;
}

std::vector<llama_token> tokenize(const llama_vocab * vocab, const std::string & s) {
    std::vector<llama_token> out(s.size() + 8);
    int n = llama_tokenize(vocab, s.data(), (int32_t) s.size(), out.data(), (int32_t) out.size(), false, false);
    if (n < 0) {
        out.resize(-n);
        n = llama_tokenize(vocab, s.data(), (int32_t) s.size(), out.data(), (int32_t) out.size(), false, false);
    }
    out.resize(n < 0 ? 0 : n);
    return out;
}

std::string read_file(const std::string & path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) gdie("cannot read " + path);
    std::ostringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

struct Load {
    common_json corpus;
    std::string dir;
    llama_model * model = nullptr;
    Ctx c;
    Load(const char * corpus_path, const char * gguf) {
        std::string cp = corpus_path;
        dir = cp.find('/') == std::string::npos ? "." : cp.substr(0, cp.rfind('/'));
        try {
            corpus = common_json::parse(read_file(cp));
        } catch (const std::exception & e) {
            gdie(cp + ": " + e.what());
        }
        llama_log_set(gquiet, nullptr);
        llama_backend_init();
        llama_model_params mp = llama_model_default_params();
        mp.vocab_only = true;
        mp.n_gpu_layers = 0;
        model = llama_model_load_from_file(gguf, mp);
        if (!model) gdie(std::string("cannot load ") + gguf);
        c.vocab = llama_model_get_vocab(model);
        c.n_vocab = llama_vocab_n_tokens(c.vocab);
        for (int i = 0; i < c.n_vocab; i++) c.pieces.push_back(piece_of(c.vocab, i));
    }
    ~Load() { llama_model_free(model); }
    std::string text_of(const common_json & g) {
        if (g.contains("file")) return read_file(dir + "/" + g.at("file").get<std::string>());
        return g.at("text").get<std::string>();
    }
};

}  // namespace

int cmd_grammar(int argc, char ** argv) {
    if (argc != 5) gdie("usage: llama-ref grammar CORPUS_JSON GGUF NAME");
    Load L(argv[2], argv[3]);
    Ctx & c = L.c;
    common_json out = common_json::object();
    out["vocab"] = argv[4];
    out["n_vocab"] = c.n_vocab;
    Fnv pf;
    std::vector<llama_token> eog;
    for (int i = 0; i < c.n_vocab; i++) {
        pf.u32((uint32_t) c.pieces[i].size());
        for (unsigned char ch : c.pieces[i]) pf.byte(ch);
        if (llama_vocab_is_eog(c.vocab, i)) eog.push_back(i);
    }
    out["pieces_fnv"] = pf.hex();
    out["eog"] = eog;
    // one-byte-piece tokens, by byte (the lowest id), for the "bytes"
    // sequences and the random walks' short picks
    std::vector<llama_token> byte_tok(256, -1);
    for (int i = 0; i < c.n_vocab; i++) {
        if (c.pieces[i].size() == 1 && !llama_vocab_is_eog(c.vocab, i)) {
            unsigned char b = c.pieces[i][0];
            if (byte_tok[b] < 0) byte_tok[b] = i;
        }
    }
    const llama_token eos = llama_vocab_eos(c.vocab);
    common_json results = common_json::array();
    for (const auto & g : L.corpus.at("grammars")) {
        const std::string name = g.at("name").get<std::string>();
        const std::string text = L.text_of(g);
        common_json r = common_json::object();
        r["name"] = name;
        llama_sampler * probe = llama_sampler_init_grammar(c.vocab, text.c_str(), "root");
        if (!probe) {
            r["error"] = true;
            results.push_back(r);
            continue;
        }
        llama_sampler_free(probe);
        common_json seqs = common_json::array();
        const int n_random = g.value("random", 3);
        const int steps = g.value("steps", 24);
        Fnv nf;
        for (unsigned char ch : name) nf.byte(ch);
        for (int k = 0; k < n_random; k++) {
            Rng rng(nf.h + 7919 * (k + 1));
            seqs.push_back(replay(c, text, "random", [&](int step, const std::vector<llama_token> & ids) -> llama_token {
                if (ids.empty() || step >= steps) return -1;
                std::vector<llama_token> eogs, rest, short_;
                for (auto id : ids) {
                    if (llama_vocab_is_eog(c.vocab, id)) eogs.push_back(id);
                    else {
                        rest.push_back(id);
                        if (c.pieces[id].size() == 1) short_.push_back(id);
                    }
                }
                if (!eogs.empty() && (rest.empty() || rng.below(4) == 0)) return eogs[rng.below(eogs.size())];
                if (rest.empty()) return -1;
                if (!short_.empty() && rng.below(2) == 0) return short_[rng.below(short_.size())];
                return rest[rng.below(rest.size())];
            }));
        }
        if (g.contains("texts")) {
            for (const auto & t : g.at("texts")) {
                const std::string s = t.get<std::string>();
                std::vector<llama_token> toks = tokenize(c.vocab, s);
                seqs.push_back(replay(c, text, "text", [&](int step, const std::vector<llama_token> & ids) -> llama_token {
                    if (step < (int) toks.size()) return toks[step];
                    if (step == (int) toks.size() && eos >= 0 && std::binary_search(ids.begin(), ids.end(), eos)) return eos;
                    return -1;
                }));
                bool ascii = true, have = true;
                for (unsigned char ch : s) {
                    if (ch >= 0x80) ascii = false;
                    if (byte_tok[ch] < 0) have = false;
                }
                if (ascii || !have) continue;
                seqs.push_back(replay(c, text, "bytes", [&](int step, const std::vector<llama_token> &) -> llama_token {
                    if (step < (int) s.size()) return byte_tok[(unsigned char) s[step]];
                    return -1;
                }));
            }
        }
        r["sequences"] = seqs;
        results.push_back(r);
    }
    out["grammars"] = results;
    printf("%s\n", out.dump_safe(0).c_str());
    llama_backend_free();
    return 0;
}

// grammar-bench: for each grammar with texts, the mean time of one
// llama_sampler_apply over the whole vocabulary along the tokenization of
// its texts (the array is refilled outside the timed region), REPS
// times. Output: JSON lines {"name", "steps", "ns_per_apply"}.
int cmd_grammar_bench(int argc, char ** argv) {
    if (argc != 5 && argc != 6) gdie("usage: llama-ref grammar-bench CORPUS_JSON GGUF NAME [REPS]");
    Load L(argv[2], argv[3]);
    Ctx & c = L.c;
    const int reps = argc == 6 ? atoi(argv[5]) : 3;
    for (const auto & g : L.corpus.at("grammars")) {
        if (!g.contains("texts") || !g.value("bench", false)) continue;
        const std::string name = g.at("name").get<std::string>();
        const std::string text = L.text_of(g);
        double total_ns = 0;
        long steps = 0;
        for (int rep = 0; rep < reps; rep++) {
            for (const auto & t : g.at("texts")) {
                std::vector<llama_token> toks = tokenize(c.vocab, t.get<std::string>());
                llama_sampler * smpl = llama_sampler_init_grammar(c.vocab, text.c_str(), "root");
                if (!smpl) gdie(name + ": refused");
                for (llama_token tok : toks) {
                    c.cur.resize(c.n_vocab);
                    for (int i = 0; i < c.n_vocab; i++) c.cur[i] = {i, 0.0f, 0.0f};
                    llama_token_data_array arr = {c.cur.data(), c.cur.size(), -1, false};
                    auto t0 = std::chrono::steady_clock::now();
                    llama_sampler_apply(smpl, &arr);
                    auto t1 = std::chrono::steady_clock::now();
                    total_ns += std::chrono::duration<double, std::nano>(t1 - t0).count();
                    steps++;
                    if (!std::isfinite(c.cur[tok].logit)) break;
                    llama_sampler_accept(smpl, tok);
                }
                llama_sampler_free(smpl);
            }
        }
        printf("{\"vocab\": \"%s\", \"name\": \"%s\", \"steps\": %ld, \"ns_per_apply\": %.0f}\n", argv[4], name.c_str(), steps, steps ? total_ns / steps : 0.0);
    }
    llama_backend_free();
    return 0;
}
