#!/usr/bin/env bash
# ggml's RPC backend has no abort callback: a cancelled compute whose graph
# has splits on remote devices ran every one of them to the end. This patch
# gives RPC backends the optional "ggml_backend_set_abort_callback" that the
# CPU backend already offers through its registry's proc address (ggml-rs
# installs it on every backend that has one): graph_compute asks the
# callback before sending a split to the server and returns
# GGML_STATUS_ABORTED when it says so, which ends the scheduler's compute at
# the next remote split. A split already sent runs to its end on the server.
# Usage: 04-rpc-abort-callback.sh GGML_DIR   (idempotent)
set -euo pipefail
python3 - "$1/src/ggml-rpc/ggml-rpc.cpp" <<'PY'
import sys

MARK = "ggml-rs patch 04-rpc-abort-callback"
path = sys.argv[1]
src = open(path).read()
if MARK in src:
    sys.exit(0)

edits = [
    # The callback lives in the backend's context (default: none).
    ('''struct ggml_backend_rpc_context {
    std::shared_ptr<rpc_dispatcher> dispatcher;
    uint32_t                        device;
    std::string                     name;
};''', '''struct ggml_backend_rpc_context {
    std::shared_ptr<rpc_dispatcher> dispatcher;
    uint32_t                        device;
    std::string                     name;
    ggml_abort_callback             abort_callback      = nullptr; // ggml-rs patch 04-rpc-abort-callback
    void *                          abort_callback_data = nullptr;
};'''),
    # Asked before each split is sent.
    ('''    bool reuse = cgraph->uid != 0 && rpc_dev_ctx->last_graph_uid == cgraph->uid;''',
     '''    if (rpc_ctx->abort_callback && rpc_ctx->abort_callback(rpc_ctx->abort_callback_data)) { // ggml-rs patch 04-rpc-abort-callback
        return GGML_STATUS_ABORTED;
    }
    bool reuse = cgraph->uid != 0 && rpc_dev_ctx->last_graph_uid == cgraph->uid;'''),
    # The setter, found through the registry like the CPU's.
    ('''static void * ggml_backend_rpc_get_proc_address(ggml_backend_reg_t reg, const char * name) {''',
     '''// ggml-rs patch 04-rpc-abort-callback: the setter the CPU backend also offers.
static void ggml_backend_rpc_rs_set_abort_callback(ggml_backend_t backend, ggml_abort_callback cb, void * data) {
    if (!ggml_backend_is_rpc(backend)) {
        return;
    }
    ggml_backend_rpc_context * ctx = (ggml_backend_rpc_context *) backend->context;
    ctx->abort_callback      = cb;
    ctx->abort_callback_data = data;
}

static void * ggml_backend_rpc_get_proc_address(ggml_backend_reg_t reg, const char * name) {
    if (std::strcmp(name, "ggml_backend_set_abort_callback") == 0) {
        return (void *)ggml_backend_rpc_rs_set_abort_callback;
    }'''),
]
for old, new in edits:
    n = src.count(old)
    if n != 1:
        sys.exit(f"04-rpc-abort-callback: expected one match in {path}, found {n}:\n{old}")
    src = src.replace(old, new)
open(path, "w").write(src)
PY
