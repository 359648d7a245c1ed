// ik-ref: ik_llama.cpp (the CPU-tuned fork of llama.cpp) as a speed anchor
// for ggml-rs's `make bench` (issue 27). Calls only ik's public API
// (include/llama.h of the slm_ikllama_sys crate's tree, an older llama.cpp
// API with ik's extensions); built by scripts/build-ik-ref.sh.
//
//   ik-ref bench [-p 512] [-n 128] [-r 3] [-ubatch N] [-t N] [-fa 0|1] [-rtr] [-json] [-v] MODEL
//       The same contract as `llama-ref bench` (tools/llama-ref): pp<p> and
//       tg<n> tokens/s, mean and sd over -r repetitions after one warm-up
//       each. pp decodes a random prompt of p tokens in one llama_decode
//       (n_batch p; n_ubatch p up to 512, or -ubatch); tg decodes n random
//       tokens one per llama_decode from an empty cache; the KV cache is
//       cleared before each run. The random tokens are llama-ref's (the same
//       LCG and seed).
//       ik's options are its llama-bench's defaults: flash attention on
//       (-fa 0 turns it off; "on"/"off"/"auto" are taken too, auto = on as
//       on the CPU), fused MoE up/gate (fmoe) on, fused up/gate on, graph
//       reuse on, MLA 3 (DeepSeek only), f16 KV cache, mmap. -rtr: run-time
//       repacking of the weights into ik's interleaved row layouts at load
//       (llama_model_params.repack_tensors, llama-bench's -rtr 1).
//       -json: one line {"model","desc","threads","flash_attn","rtr","reps",
//       "pp":{"n","tps","sd"},"tg":{"n","tps","sd"}}; else llama-bench's
//       markdown rows. -v: ik's log on stderr.
#include "llama.h"
#include "../common/cli.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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
    std::string cmd, model;
    bool json = false, verbose = false, rtr = false, fa = true;
    int threads = 0, n_prompt = 512, n_gen = 128, reps = 3, ubatch = 0;
};


void usage() {
    fprintf(stderr, "usage: ik-ref bench [-p 512] [-n 128] [-r 3] [-ubatch N] [-t N] [-fa 0|1] [-rtr] [-json] [-v] MODEL\n");
    exit(2);
}


Opts parse(int argc, char ** argv) {
    if (argc < 2) usage();
    Opts o;
    o.cmd = argv[1];
    if (o.cmd != "bench") usage();
    std::vector<std::string> pos;
    for (int i = 2; i < argc; i++) {
        std::string a = argv[i];
        auto next = [&]() -> const char * { if (i + 1 >= argc) die("%s needs a value", argv[i]); return argv[++i]; };
        if (a == "-json") o.json = true;
        else if (a == "-v") o.verbose = true;
        else if (a == "-rtr") o.rtr = true;
        else if (a == "-p") o.n_prompt = to_int(next());
        else if (a == "-n") o.n_gen = to_int(next());
        else if (a == "-r") o.reps = to_int(next());
        else if (a == "-t") o.threads = to_int(next());
        else if (a == "-ubatch") o.ubatch = to_int(next());
        else if (a == "-fa") {
            std::string v = next();
            if (v == "1" || v == "on" || v == "auto") o.fa = true;
            else if (v == "0" || v == "off") o.fa = false;
            else die("-fa: 0 or 1 (on, off, auto), not %s", v.c_str());
        } else if (a == "-h" || a == "--help") usage();
        else if (a.size() > 1 && a[0] == '-') die("unknown option %s", a.c_str());
        else pos.push_back(a);
    }
    if (pos.size() != 1) usage();
    o.model = pos[0];
    if (o.threads <= 0) o.threads = std::max(1u, std::thread::hardware_concurrency());
    if (o.reps < 1) die("-r must be at least 1");
    if (o.n_prompt < 0 || o.n_gen < 0) die("-p and -n must not be negative");
    if (o.ubatch < 0) die("-ubatch must be positive");
    return o;
}

void quiet_log(ggml_log_level level, const char * text, void *) {
    if (level == GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

void verbose_log(ggml_log_level, const char * text, void *) { fputs(text, stderr); }



int cmd_bench(const Opts & o) {
    using clk = std::chrono::steady_clock;
    const int n_batch = std::max(o.n_prompt, 1);
    const int n_ubatch = std::min(n_batch, o.ubatch > 0 ? o.ubatch : 512);

    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    mp.repack_tensors = o.rtr;
    mp.flash_attn = o.fa;
    mp.mla = 3;  // llama-bench's -mla default (DeepSeek models only)
    mp.n_ubatch = n_ubatch;
    llama_model * model = llama_model_load_from_file(o.model.c_str(), mp);
    if (!model) die("cannot load %s", o.model.c_str());
    const int n_vocab = llama_vocab_n_tokens(llama_get_model_vocab(model));

    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t) std::max(o.n_prompt + o.n_gen, 64);
    cp.n_batch = (uint32_t) n_batch;
    cp.n_ubatch = (uint32_t) n_ubatch;
    cp.n_seq_max = 1;
    cp.n_threads = (uint32_t) o.threads;
    cp.n_threads_batch = (uint32_t) o.threads;
    cp.type_k = GGML_TYPE_F16;
    cp.type_v = GGML_TYPE_F16;
    // ik's llama-bench defaults (most are also llama_context_default_params').
    cp.flash_attn = o.fa;
    cp.mla_attn = 3;
    cp.attn_max_batch = 0;
    cp.fused_moe_up_gate = true;
    cp.fused_up_gate = true;
    cp.graph_reuse = true;
    cp.only_active_experts = true;
    cp.min_experts = -1;
    cp.thresh_experts = 0.0f;
    llama_context * ctx = llama_init_from_model(model, cp);
    if (!ctx) die("cannot create a context for %s", o.model.c_str());

    char desc[256];
    llama_model_desc(model, desc, sizeof desc);
    refcli::TokenGen gen;  // llama-ref's generator and seed
    auto rnd = [&]() -> llama_token { return gen.next(n_vocab); };

    llama_batch b = llama_batch_init(n_batch, 0, 1);
    auto decode = [&](const std::vector<llama_token> & toks, int pos0) {
        for (size_t i = 0; i < toks.size(); i += n_batch) {
            size_t n = std::min(toks.size() - i, (size_t) n_batch);
            b.n_tokens = (int32_t) n;
            for (size_t j = 0; j < n; j++) {
                b.token[j] = toks[i + j];
                b.pos[j] = (llama_pos) (pos0 + i + j);
                b.n_seq_id[j] = 1;
                b.seq_id[j][0] = 0;
                b.logits[j] = i + j == toks.size() - 1;
            }
            int rc = llama_decode(ctx, b);
            if (rc != 0) die("llama_decode failed (%s)", std::to_string(rc).c_str());
        }
    };
    auto run_pp = [&]() {
        std::vector<llama_token> toks(o.n_prompt);
        for (auto & t : toks) t = rnd();
        llama_kv_cache_clear(ctx);
        auto t0 = clk::now();
        decode(toks, 0);
        llama_synchronize(ctx);
        return std::chrono::duration<double>(clk::now() - t0).count();
    };
    auto run_tg = [&]() {
        llama_kv_cache_clear(ctx);
        llama_token t = rnd();
        auto t0 = clk::now();
        for (int i = 0; i < o.n_gen; i++) {
            decode({t}, i);
            llama_synchronize(ctx);
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
    llama_batch_free(b);

    const char * fa = o.fa ? "on" : "off";
    if (o.json) {
        printf("{\"model\":%s,\"desc\":%s,\"threads\":%d,\"flash_attn\":\"%s\",\"rtr\":%s,\"reps\":%d", json_str(o.model).c_str(),
               json_str(desc).c_str(), o.threads, fa, o.rtr ? "true" : "false", o.reps);
        if (!pp.empty()) { Stats st = stats(pp); printf(",\"pp\":{\"n\":%d,\"tps\":%.3f,\"sd\":%.3f}", o.n_prompt, st.mean, st.sd); }
        if (!tg.empty()) { Stats st = stats(tg); printf(",\"tg\":{\"n\":%d,\"tps\":%.3f,\"sd\":%.3f}", o.n_gen, st.mean, st.sd); }
        printf("}\n");
    } else {
        printf("| %-40s | %7s | %4s | %3s | %10s | %20s |\n", "model", "threads", "fa", "rtr", "test", "t/s");
        auto row = [&](const char * kind, int n, const std::vector<double> & v) {
            Stats st = stats(v);
            std::string test = std::string(kind) + std::to_string(n);
            printf("| %-40s | %7d | %4s | %3d | %10s | %11.2f ± %6.2f |\n", desc, o.threads, fa, o.rtr ? 1 : 0, test.c_str(), st.mean,
                   st.sd);
        };
        if (!pp.empty()) row("pp", o.n_prompt, pp);
        if (!tg.empty()) row("tg", o.n_gen, tg);
    }
    fflush(stdout);
    llama_free(ctx);
    llama_free_model(model);
    return 0;
}

}  // namespace

int main(int argc, char ** argv) {
    refcli::program = "ik-ref";
    Opts o = parse(argc, argv);
    llama_log_set(o.verbose ? verbose_log : quiet_log, nullptr);
    llama_backend_init();
    int rc = cmd_bench(o);
    llama_backend_free();
    return rc;
}
