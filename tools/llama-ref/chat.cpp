// llama-ref chat: llama.cpp's chat-template rendering, the reference of
// ggml-rs's go/chat package.
//
//   llama-ref chat [-bos S] [-eos S] TEMPLATE_FILE CONVERSATIONS_JSON
//
// The template goes through common_chat_templates_init (no model: the
// -bos/-eos strings are bos_token and eos_token, as a model's vocabulary
// would give them; nothing is stripped, as add_bos/add_eos are a model's)
// and each conversation through common_chat_templates_apply with the inputs
// llama-server builds from a chat request (tools/server's
// oaicompat_chat_params_parse, tool-free): the messages parsed by
// common_chat_msgs_parse_oaicompat, use_jinja, add_generation_prompt,
// enable_thinking, and chat_template_kwargs (each value as JSON text; an
// "enable_thinking" kwarg overrides enable_thinking). llama-server's
// assistant prefill (a last assistant message continued rather than closed)
// is the server's own step after rendering and is not done here.
//
// CONVERSATIONS_JSON: {"conversations": [{"name": S, "messages": [...],
// "add_generation_prompt": B (default true), "enable_thinking": B (default
// true), "chat_template_kwargs": {...}}, ...]}.
// Output: JSON {"template": TEMPLATE_FILE, "results": [{"name": S,
// "prompt": S} or {"name": S, "error": S}, ...]}.
//
// The date the templates see (date_string, datetime, strftime_now) is the
// clock's: scripts/chat-golden.sh runs this under faketime.
#include "chat.h"
#include "json.h"

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

[[noreturn]] void chat_die(const std::string & msg) {
    fprintf(stderr, "llama-ref chat: %s\n", msg.c_str());
    exit(1);
}

std::string read_file(const std::string & path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) chat_die("cannot read " + path);
    std::ostringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

// One conversation, as llama-server renders a request's prompt.
std::string render(const common_chat_templates * tmpls, const common_json & conv) {
    common_chat_templates_inputs inputs;
    inputs.use_jinja             = true;
    inputs.messages              = common_chat_msgs_parse_oaicompat(conv.at("messages"));
    inputs.add_generation_prompt = conv.value("add_generation_prompt", true);
    inputs.enable_thinking       = conv.value("enable_thinking", true);
    if (conv.contains("chat_template_kwargs")) {
        for (const auto & [k, v] : conv.at("chat_template_kwargs").items()) {
            inputs.chat_template_kwargs[k] = v.dump();
        }
    }
    auto it = inputs.chat_template_kwargs.find("enable_thinking");
    if (it != inputs.chat_template_kwargs.end()) {
        if (it->second == "true") inputs.enable_thinking = true;
        else if (it->second == "false") inputs.enable_thinking = false;
    }
    return common_chat_templates_apply(tmpls, inputs).prompt;
}

}  // namespace

int cmd_chat(int argc, char ** argv) {
    std::string bos, eos;
    std::vector<std::string> pos;
    for (int i = 2; i < argc; i++) {
        std::string a = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) chat_die(a + " needs a value");
            return argv[++i];
        };
        if (a == "-bos") bos = next();
        else if (a == "-eos") eos = next();
        else pos.push_back(a);
    }
    if (pos.size() != 2) chat_die("usage: llama-ref chat [-bos S] [-eos S] TEMPLATE_FILE CONVERSATIONS_JSON");

    const std::string src = read_file(pos[0]);
    common_json convs;
    try {
        convs = common_json::parse(read_file(pos[1])).at("conversations");
    } catch (const std::exception & e) {
        chat_die(pos[1] + ": " + e.what());
    }

    common_json out = common_json::object();
    out["template"] = pos[0];
    common_json results = common_json::array();
    common_chat_templates_ptr tmpls;
    std::string init_error;
    try {
        tmpls = common_chat_templates_init(nullptr, src, bos, eos);
    } catch (const std::exception & e) {
        init_error = e.what();
    }
    for (size_t i = 0; i < convs.size(); i++) {
        const auto & conv = convs.at(i);
        common_json r = common_json::object();
        r["name"] = conv.value("name", std::string());
        if (!init_error.empty()) {
            r["error"] = init_error;
        } else {
            try {
                r["prompt"] = render(tmpls.get(), conv);
            } catch (const std::exception & e) {
                r["error"] = std::string(e.what());
            }
        }
        results.push_back(r);
    }
    out["results"] = results;
    printf("%s\n", out.dump(1).c_str());
    return 0;
}
