// What the reference drivers (tools/llama-ref over the pinned llama.cpp,
// tools/ik-ref over ik_llama.cpp) share and that no llama.h API touches:
// errors, integer flags, JSON strings, repetition statistics and the
// bench prompts' token generator. Header-only: each tool includes it
// once, after setting its name in refcli::program.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace refcli {

// The tool's name, the prefix of its error messages.
inline const char * program = "ref";

[[noreturn]] inline void die(const char * fmt, const char * arg = "") {
    fprintf(stderr, "%s: ", program);
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n");
    exit(1);
}

inline int to_int(const char * s) {
    char * end = nullptr;
    long v = strtol(s, &end, 10);
    if (!*s || *end) die("not an integer: %s", s);
    return (int) v;
}

inline std::string json_str(const std::string & s) {
    std::string r = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\') { r += '\\'; r += c; }
        else if ((unsigned char) c < 0x20) { char buf[8]; snprintf(buf, sizeof buf, "\\u%04x", c); r += buf; }
        else r += c;
    }
    return r + "\"";
}

struct Stats { double mean, sd; };

// Mean and sample standard deviation (0 for one value).
inline Stats stats(const std::vector<double> & v) {
    double m = 0, q = 0;
    for (double x : v) m += x;
    m /= v.size();
    for (double x : v) q += (x - m) * (x - m);
    return {m, v.size() > 1 ? std::sqrt(q / (v.size() - 1)) : 0.0};
}

// The bench prompts' tokens: one LCG and seed, so that every program
// measures the same token ids.
struct TokenGen {
    uint32_t state = 0x2545F491u;
    int32_t next(int32_t n_vocab) {
        state = state * 1664525u + 1013904223u;
        return (int32_t) ((state >> 8) % (uint32_t) n_vocab);
    }
};

}  // namespace refcli
