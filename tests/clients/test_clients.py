"""The server tested with the clients people use: the PyPI packages ollama
and openai (pinned in requirements.txt), against `ggml-rs serve` on a
loopback port.

    python test_clients.py RUNNER DECODER.gguf EMBEDDER.gguf

Differential checks: greedy text through each API equals `ggml-rs generate
-temp 0` on the same model (the runner alone); embeddings through each API
equal `ggml-rs embed -json`; streamed text equals the non-streamed reply.
The server runs with an API key (GGML_RS_API_KEY): the clients send it as
they do (OpenAI's api_key, Ollama's headers), and without it get a 401.
Tool calling runs against a second server whose decoder has Qwen3's chat
template (-chat-template, from go/chat/testdata/templates): the openai
SDK's tools with tool_choice "required" and a named function (a grammar
forces the call, so even the random weights give one that validates),
streamed and not; ollama-python's tools=[a Python function] and a tool
reply continued.
Exit status 1 with the failed check's message on any failure.
"""

import json
import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.request

from typing import Literal

import ollama
import openai
import pydantic

RUNNER, DECODER, EMBEDDER = sys.argv[1:4]
DEC = os.path.basename(DECODER)[: -len(".gguf")]
EMB = os.path.basename(EMBEDDER)[: -len(".gguf")]
PROMPT = "The quick brown fox"
N = 24
TEXTS = ["A man is playing a guitar.", "The cat sleeps on the sofa.", "Stock markets fell sharply today."]
KEY = secrets.token_hex(16)
AUTH = {"Authorization": f"Bearer {KEY}"}


class Pick(pydantic.BaseModel):
    """A reply whose JSON schema has a finite language."""
    color: Literal["red", "green", "blue"]
    count: int = pydantic.Field(ge=1, le=9)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def check(cond, msg):
    if not cond:
        raise AssertionError(msg)


def runner_greedy():
    """`ggml-rs generate` alone: it prints the prompt, then the text."""
    out = subprocess.run([RUNNER, "generate", "-temp", "0", "-n", str(N), "-ctx", "512", DECODER, "-p", PROMPT],
                         capture_output=True, check=True).stdout.decode("utf-8", "replace")
    check(out.startswith(PROMPT), f"generate printed {out[:40]!r}")
    return out[len(PROMPT):].removesuffix("\n")


def runner_embeddings():
    out = subprocess.run([RUNNER, "embed", "-json", EMBEDDER, *TEXTS], capture_output=True, check=True).stdout
    return [d["embedding"] for d in json.loads(out)["data"]]


def close(a, b, tol=1e-6):
    return len(a) == len(b) and all(abs(x - y) <= tol for x, y in zip(a, b))


QWEN3_TEMPLATE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "go", "chat", "testdata",
                              "templates", "Qwen-Qwen3-0.6B.jinja")


def serving(args, checks):
    """Runs `ggml-rs serve` with args on a free port while checks(host) runs."""
    port = free_port()
    host = f"http://127.0.0.1:{port}"
    server = subprocess.Popen([RUNNER, "serve", "-addr", f"127.0.0.1:{port}", *args],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env={**os.environ, "GGML_RS_API_KEY": KEY})
    try:
        for _ in range(300):
            try:
                urllib.request.urlopen(urllib.request.Request(host + "/api/version", headers=AUTH), timeout=1)
                break
            except OSError:
                if server.poll() is not None:
                    raise AssertionError("the server exited: " + server.stderr.read().decode())
                time.sleep(0.1)
        checks(host)
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
    check(server.returncode == 0, f"the server exited with {server.returncode} on SIGTERM")


def main():
    want_text = runner_greedy()
    want_embs = runner_embeddings()
    serving(["-parallel", "4", "-ctx", "512", DECODER, EMBEDDER], lambda host: run_checks(host, want_text, want_embs))
    serving(["-parallel", "2", "-ctx", "2048", "-chat-template", QWEN3_TEMPLATE, DECODER], run_tool_checks)
    print("clients: all checks passed")


def get_weather(city: Literal["Paris", "Tokyo"], days: int) -> str:
    """Get the weather forecast.

    Args:
        city: The city
        days: How many days ahead
    """
    return f"sunny in {city} for {days} days"


# The same tool as OpenAI's clients describe it, with a finite argument
# language (enums, a bounded integer).
WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Get the weather forecast.",
           "parameters": {"type": "object", "properties": {"city": {"type": "string", "enum": ["Paris", "Tokyo"]},
                                                           "days": {"type": "integer", "minimum": 1, "maximum": 3}},
                          "required": ["city", "days"], "additionalProperties": False}}}
TIME = {"type": "function", "function": {"name": "get_time", "parameters": {
    "type": "object", "properties": {"zone": {"type": "string", "enum": ["UTC", "CET"]}}, "required": ["zone"],
    "additionalProperties": False}}}


def valid_call(name, args):
    if name == "get_weather":
        return set(args) == {"city", "days"} and args["city"] in ("Paris", "Tokyo") and args["days"] in (1, 2, 3)
    return name == "get_time" and args == {"zone": args.get("zone")} and args["zone"] in ("UTC", "CET")


def run_tool_checks(host):
    ol = ollama.Client(host=host, headers=AUTH)
    oa = openai.OpenAI(base_url=host + "/v1", api_key=KEY)
    msgs = [{"role": "user", "content": "What is the weather in Paris?"}]
    calls = []
    for choice in ("required", {"type": "function", "function": {"name": "get_time"}}):
        r = oa.chat.completions.create(model=DEC, messages=msgs, tools=[WEATHER, TIME], tool_choice=choice,
                                       temperature=0, max_tokens=300)
        ch = r.choices[0]
        check(ch.finish_reason == "tool_calls" and ch.message.tool_calls and len(ch.message.tool_calls) == 1,
              f"openai tools {choice}: {ch}")
        tc = ch.message.tool_calls[0]
        args = json.loads(tc.function.arguments)
        check(tc.id.startswith("call_") and tc.type == "function" and valid_call(tc.function.name, args),
              f"openai tool call {tc}")
        check(choice == "required" or tc.function.name == "get_time", f"named choice called {tc.function.name}")
        # streamed: the deltas assemble into the same call
        parts, finish = {}, None
        for chunk in oa.chat.completions.create(model=DEC, messages=msgs, tools=[WEATHER, TIME], tool_choice=choice,
                                                temperature=0, max_tokens=300, stream=True):
            for c in chunk.choices:
                finish = c.finish_reason or finish
                for d in c.delta.tool_calls or []:
                    p = parts.setdefault(d.index, {"id": None, "name": None, "arguments": ""})
                    p["id"] = d.id or p["id"]
                    if d.function:
                        p["name"] = d.function.name or p["name"]
                        p["arguments"] += d.function.arguments or ""
        check(finish == "tool_calls" and len(parts) == 1, f"streamed openai tools: {finish} {parts}")
        p = parts[0]
        check(p["id"].startswith("call_") and p["name"] == tc.function.name and json.loads(p["arguments"]) == args,
              f"streamed call {p} vs {tc}")
        calls.append(tc)
    # The call's result continues the conversation (OpenAI's shape).
    tc = calls[0]
    follow = msgs + [{"role": "assistant", "content": None, "tool_calls": [tc.model_dump()]},
                     {"role": "tool", "tool_call_id": tc.id, "content": "sunny"}]
    r = oa.chat.completions.create(model=DEC, messages=follow, tools=[WEATHER, TIME], temperature=0, max_tokens=8)
    check(r.choices[0].finish_reason in ("stop", "length", "tool_calls"), f"openai tool reply: {r.choices[0]}")
    try:
        oa.chat.completions.create(model=DEC, messages=msgs, tools=[WEATHER],
                                   tool_choice={"type": "function", "function": {"name": "nope"}})
        check(False, "tool_choice naming an unknown function accepted")
    except openai.BadRequestError as err:
        check("nope" in str(err), f"openai unknown function: {err}")
    print("tools (openai): ok (required and named calls validate, streamed and not; a tool reply continues)")

    # ollama-python: a Python function as the tool (auto, as Ollama: the
    # random weights may or may not call), then the call and its result
    # continued through Ollama's message shape.
    r = ol.chat(model=DEC, messages=msgs, tools=[get_weather], options={"temperature": 0, "num_predict": 32})
    check(r.done and r.message.role == "assistant", f"ollama tools: {r}")
    for c in r.message.tool_calls or []:
        check(c.function.name == "get_weather" and isinstance(c.function.arguments, dict), f"ollama tool call {c}")
    args = json.loads(calls[0].function.arguments)
    history = msgs + [ollama.Message(role="assistant", content="", tool_calls=[
        ollama.Message.ToolCall(function=ollama.Message.ToolCall.Function(name=calls[0].function.name, arguments=args))]),
        {"role": "tool", "content": get_weather("Paris", 2), "tool_name": calls[0].function.name}]
    r = ol.chat(model=DEC, messages=history, tools=[get_weather], options={"temperature": 0, "num_predict": 8})
    check(r.done and r.prompt_eval_count > 0, f"ollama tool reply: {r}")
    parts = list(ol.chat(model=DEC, messages=history, tools=[get_weather], stream=True,
                         options={"temperature": 0, "num_predict": 8}))
    check(parts[-1].done, "streamed ollama tool reply")
    try:
        ol.chat(model=DEC, messages=msgs, tools=[{"type": "function", "function": {"description": "no name"}}])
        check(False, "a tool without a name accepted")
    except ollama.ResponseError as err:
        check(err.status_code == 400 and "name" in err.error, f"ollama nameless tool: {err.status_code} {err.error}")
    print("tools (ollama): ok (a Python function as a tool, a tool reply continued)")


def run_checks(host, want_text, want_embs):
    ol = ollama.Client(host=host, headers=AUTH)
    oa = openai.OpenAI(base_url=host + "/v1", api_key=KEY)
    # repeat_penalty 1: Ollama's default (1.1) would penalise repeats; the runner does not.
    greedy = {"temperature": 0, "num_predict": N, "repeat_penalty": 1}

    # Listing.
    names = sorted(m.model for m in ol.list().models)
    check(names == sorted([DEC + ":latest", EMB + ":latest"]), f"ollama list: {names}")
    show = ol.show(DEC)
    check(show.details.family == "qwen3" and show.details.format == "gguf", f"ollama show: {show.details}")
    check("completion" in show.capabilities, f"capabilities {show.capabilities}")
    ids = sorted(m.id for m in oa.models.list().data)
    check(ids == names, f"openai models: {ids}")
    print("listing: ok")

    # Generate: greedy raw text equals the runner's, streamed or not.
    r = ol.generate(model=DEC, prompt=PROMPT, raw=True, options=greedy)
    check(r.response == want_text, f"ollama generate {r.response!r}, runner {want_text!r}")
    check(r.done and r.done_reason == "length" and r.eval_count == N and r.prompt_eval_count > 0, f"final fields: {r}")
    check(r.total_duration and r.eval_duration and r.prompt_eval_duration, "durations missing")
    parts = list(ol.generate(model=DEC, prompt=PROMPT, raw=True, options=greedy, stream=True))
    check("".join(p.response for p in parts) == want_text, "streamed generate differs")
    check(parts[-1].done and not any(p.done for p in parts[:-1]), "done only on the last part")
    c = oa.completions.create(model=DEC, prompt=PROMPT, max_tokens=N, temperature=0)
    check(c.choices[0].text == want_text and c.choices[0].finish_reason == "length", f"openai completion {c.choices[0]}")
    check(c.usage.completion_tokens == N, f"usage {c.usage}")
    s = "".join(ch.choices[0].text for ch in oa.completions.create(model=DEC, prompt=PROMPT, max_tokens=N, temperature=0, stream=True) if ch.choices)
    check(s == want_text, "streamed openai completion differs")
    print("generate: ok (greedy text equals ggml-rs generate's)")

    # Chat: the same conversation through both APIs, streamed or not.
    msgs = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Hello there"},
            {"role": "assistant", "content": "Hi."}, {"role": "user", "content": "Tell me a story."}]
    a = ol.chat(model=DEC, messages=msgs, options=greedy)
    check(a.message.role == "assistant" and a.done and a.eval_count == N, f"ollama chat {a}")
    b = "".join(p.message.content for p in ol.chat(model=DEC, messages=msgs, options=greedy, stream=True))
    check(b == a.message.content, "streamed ollama chat differs")
    o = oa.chat.completions.create(model=DEC, messages=msgs, max_tokens=N, temperature=0)
    check(o.choices[0].message.content == a.message.content, f"openai chat {o.choices[0].message.content!r} vs ollama {a.message.content!r}")
    check(o.usage.prompt_tokens == a.prompt_eval_count, f"prompt tokens {o.usage.prompt_tokens} vs {a.prompt_eval_count}")
    stream = oa.chat.completions.create(model=DEC, messages=msgs, max_tokens=N, temperature=0, stream=True, stream_options={"include_usage": True})
    text, usage, finish = "", None, None
    for ch in stream:
        if ch.usage:
            usage = ch.usage
        for choice in ch.choices:
            text += choice.delta.content or ""
            finish = choice.finish_reason or finish
    check(text == a.message.content and finish == "length" and usage and usage.completion_tokens == N, "streamed openai chat differs")
    # A seeded sample is reproducible.
    s1 = ol.generate(model=DEC, prompt=PROMPT, options={"seed": 7, "temperature": 1, "num_predict": 16}).response
    s2 = ol.generate(model=DEC, prompt=PROMPT, options={"seed": 7, "temperature": 1, "num_predict": 16}).response
    check(s1 == s2, "seeded generations differ")
    print("chat: ok (both APIs, streamed and not, the same text)")

    # Structured output: a Pydantic model's schema through each client's own
    # way of asking for it (ollama's format=, openai's parse with
    # response_format=Model); the schema's language is finite, so even the
    # random weights end inside it and the reply validates.
    for temp in (0, 1.1):
        r = ol.chat(model=DEC, messages=msgs, format=Pick.model_json_schema(),
                    options={"temperature": temp, "seed": 3, "num_predict": 200})
        check(r.done_reason == "stop", f"ollama format: {r.done_reason} {r.message.content!r}")
        Pick.model_validate_json(r.message.content)
    parts = ol.chat(model=DEC, messages=msgs, format=Pick.model_json_schema(), stream=True,
                    options={"temperature": 0, "num_predict": 200})
    streamed = "".join(p.message.content for p in parts)
    check(streamed == ol.chat(model=DEC, messages=msgs, format=Pick.model_json_schema(),
                              options={"temperature": 0, "num_predict": 200}).message.content, "streamed format differs")
    parse = oa.chat.completions.parse if hasattr(oa.chat.completions, "parse") else oa.beta.chat.completions.parse
    p = parse(model=DEC, messages=msgs, response_format=Pick, temperature=0, max_tokens=200)
    check(p.choices[0].finish_reason == "stop" and isinstance(p.choices[0].message.parsed, Pick), f"openai parse: {p.choices[0]}")
    j = oa.chat.completions.create(model=DEC, messages=msgs, response_format={"type": "json_object"}, temperature=0, max_tokens=40)
    check(j.choices[0].finish_reason in ("stop", "length"), f"json_object: {j.choices[0]}")
    try:
        ol.chat(model=DEC, messages=msgs, format={"type": "object", "properties": {"a": {"$ref": "#/nowhere"}}})
        check(False, "a schema with a dangling $ref accepted")
    except ollama.ResponseError as err:
        check(err.status_code == 400 and "schema" in err.error, f"ollama bad schema: {err.status_code} {err.error}")
    print("structured output: ok (Pydantic schemas through both clients validate)")

    # Embeddings equal ggml-rs embed's.
    e = ol.embed(model=EMB, input=TEXTS)
    check(all(close(x, y) for x, y in zip(e.embeddings, want_embs)) and len(e.embeddings) == len(TEXTS), "ollama embed differs from ggml-rs embed")
    one = ol.embeddings(model=EMB, prompt=TEXTS[0])
    check(close(one.embedding, want_embs[0]), "ollama embeddings (older API) differs")
    v = oa.embeddings.create(model=EMB, input=TEXTS)  # base64 on the wire, as the client asks by default
    check(all(close(d.embedding, w) for d, w in zip(v.data, want_embs)), "openai embeddings differ from ggml-rs embed")
    f = oa.embeddings.create(model=EMB, input=TEXTS[1], encoding_format="float")
    check(close(f.data[0].embedding, want_embs[1]), "openai float embeddings differ")
    print("embeddings: ok (equal to ggml-rs embed's)")

    # Errors reach the clients as their own exceptions.
    try:
        ol.generate(model="no-such-model", prompt="x")
        check(False, "unknown model accepted")
    except ollama.ResponseError as err:
        check(err.status_code == 404 and "not found" in err.error, f"ollama error {err.status_code} {err.error}")
    try:
        oa.chat.completions.create(model=DEC, messages=msgs, temperature=9)
        check(False, "temperature 9 accepted")
    except openai.BadRequestError as err:
        check("temperature" in str(err), f"openai error {err}")
    try:
        oa.embeddings.create(model=DEC, input="x")
        check(False, "embeddings from a decoder accepted")
    except openai.BadRequestError:
        pass
    ps = ol.ps()
    check(sorted(m.model for m in ps.models) == names, f"ps {ps}")
    print("errors and ps: ok")

    # Without the API key, or with another, a 401.
    try:
        ollama.Client(host=host).list()
        check(False, "a request without the API key accepted")
    except ollama.ResponseError as err:
        check(err.status_code == 401 and "API key" in err.error, f"ollama without the key: {err.status_code} {err.error}")
    try:
        openai.OpenAI(base_url=host + "/v1", api_key="wrong").models.list()
        check(False, "a request with a wrong API key accepted")
    except openai.AuthenticationError as err:
        check("API key" in str(err), f"openai with a wrong key: {err}")
    print("api key: ok")


if __name__ == "__main__":
    try:
        main()
    except AssertionError as e:
        print("clients: FAILED:", e, file=sys.stderr)
        sys.exit(1)
