// llama-ref schema: JSON schemas converted to GBNF by llama.cpp's own
// json_schema_to_grammar (common/json-schema-to-grammar.cpp, what
// llama-server does with json_schema and response_format), the reference of
// go/grammar/schema's corpus test.
//
//   llama-ref schema CASES_JSON
//
// CASES_JSON: {"cases": [{"name": S, "schema": V} or {"name": S, "text": S}, ...]}.
// A case's input is the text of its schema: "text" as it is (malformed
// JSON, duplicate keys, number spellings), else "schema" dumped (keys in
// their order, as common_json keeps them). It is parsed with common_json and
// converted (force_gbnf: the GBNF converter even in an llguidance build).
// Output: JSON {"results": [{"name": S, "input": S, "grammar": S} or
// {"name": S, "input": S, "error": S}, ...]}, with "warning": S where the
// converter printed one on stderr (a pattern it cannot translate).
#include "json-schema-to-grammar.h"
#include "json.h"

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <unistd.h>

namespace {

[[noreturn]] void schema_die(const std::string & msg) {
    fprintf(stderr, "llama-ref schema: %s\n", msg.c_str());
    exit(1);
}

// Runs fn with stderr sent to a temporary file, and returns what it wrote.
template <typename F> std::string capture_stderr(F && fn) {
    fflush(stderr);
    FILE * tmp = tmpfile();
    if (!tmp) schema_die("tmpfile failed");
    int saved = dup(fileno(stderr));
    dup2(fileno(tmp), fileno(stderr));
    try {
        fn();
    } catch (...) {
        fflush(stderr);
        dup2(saved, fileno(stderr));
        close(saved);
        fclose(tmp);
        throw;
    }
    fflush(stderr);
    dup2(saved, fileno(stderr));
    close(saved);
    std::string out;
    rewind(tmp);
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, tmp)) > 0) out.append(buf, n);
    fclose(tmp);
    return out;
}

}  // namespace

int cmd_schema(int argc, char ** argv) {
    if (argc != 3) schema_die("usage: llama-ref schema CASES_JSON");
    std::ifstream f(argv[2], std::ios::binary);
    if (!f) schema_die(std::string("cannot read ") + argv[2]);
    std::ostringstream ss;
    ss << f.rdbuf();
    common_json cases;
    try {
        cases = common_json::parse(ss.str()).at("cases");
    } catch (const std::exception & e) {
        schema_die(std::string(argv[2]) + ": " + e.what());
    }
    common_json results = common_json::array();
    for (const auto & c : cases) {
        common_json r = common_json::object();
        r["name"] = c.at("name");
        const std::string input = c.contains("text") ? c.at("text").get<std::string>() : c.at("schema").dump();
        r["input"] = input;
        std::string grammar, error;
        const std::string warning = capture_stderr([&] {
            try {
                grammar = json_schema_to_grammar(common_json::parse(input), /* force_gbnf= */ true);
            } catch (const std::exception & e) {
                error = e.what();
            }
        });
        if (error.empty()) {
            r["grammar"] = grammar;
        } else {
            r["error"] = error;
        }
        if (!warning.empty()) r["warning"] = warning;
        results.push_back(r);
    }
    common_json out = common_json::object();
    out["results"] = results;
    printf("%s\n", out.dump_safe(1).c_str());
    return 0;
}
