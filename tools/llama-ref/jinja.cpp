// llama-ref jinja: templates rendered by llama.cpp's own Jinja engine
// (common/jinja), the reference of go/chat/jinja's construct tests.
//
//   llama-ref jinja CASES_JSON
//
// CASES_JSON: {"cases": [{"name": S, "template": S, "vars": {...}}, ...]}.
// Each template is lexed, parsed and executed with its vars as the
// globals (global_from_json, no input marking), as common/chat.cpp does
// for a chat template, and its output gathered the same way.
// Output: JSON {"results": [{"name": S, "output": S, "output_hex": S} or
// {"name": S, "error": S}, ...]}: output_hex holds the bytes exactly
// (a template can cut a UTF-8 sequence, e.g. reversing a string by bytes;
// output then shows U+FFFD for the bytes that are not UTF-8). Templates that read the clock (strftime_now) give
// the clock's date: keep them out of the cases.
#include "chat.h"
#include "json.h"
#include "jinja/lexer.h"
#include "jinja/parser.h"
#include "jinja/runtime.h"
#include "jinja/value.h"

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

namespace {

[[noreturn]] void jinja_die(const std::string & msg) {
    fprintf(stderr, "llama-ref jinja: %s\n", msg.c_str());
    exit(1);
}

std::string render(const std::string & src, const common_json & vars) {
    jinja::lexer lexer;
    auto tokens = lexer.tokenize(src);
    jinja::program prog = jinja::parse_from_tokens(tokens);
    jinja::context ctx(tokens.source);
    jinja::global_from_json(ctx, vars, false);
    jinja::runtime runtime(ctx);
    const jinja::value results = runtime.execute(prog);
    return jinja::runtime::gather_string_parts(results)->as_string().str();
}

}  // namespace

int cmd_jinja(int argc, char ** argv) {
    if (argc != 3) jinja_die("usage: llama-ref jinja CASES_JSON");
    std::ifstream f(argv[2], std::ios::binary);
    if (!f) jinja_die(std::string("cannot read ") + argv[2]);
    std::ostringstream ss;
    ss << f.rdbuf();
    common_json cases;
    try {
        cases = common_json::parse(ss.str()).at("cases");
    } catch (const std::exception & e) {
        jinja_die(std::string(argv[2]) + ": " + e.what());
    }
    common_json results = common_json::array();
    for (const auto & c : cases) {
        common_json r = common_json::object();
        r["name"] = c.at("name");
        try {
            const std::string o = render(c.at("template").get<std::string>(), c.value("vars", common_json::object()));
            static const char * digits = "0123456789abcdef";
            std::string hex;
            for (unsigned char ch : o) {
                hex += digits[ch >> 4];
                hex += digits[ch & 15];
            }
            r["output"] = o;
            r["output_hex"] = hex;
        } catch (const std::exception & e) {
            r["error"] = std::string(e.what());
        }
        results.push_back(r);
    }
    common_json out = common_json::object();
    out["results"] = results;
    printf("%s\n", out.dump_safe(1).c_str());
    return 0;
}
