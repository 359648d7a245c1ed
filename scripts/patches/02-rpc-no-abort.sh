#!/usr/bin/env bash
# ggml's RPC client aborts the whole process (GGML_ABORT) when it cannot
# connect to a server, when the handshake fails, and when any command fails
# on an established connection, e.g. because the server was stopped. For a
# library that is unacceptable: a lost remote device must be an error.
#
# Why not C++ exceptions: the failing command runs on the RPC dispatcher's
# worker thread, not the caller's, and the caller's frames include C code
# (ggml-alloc.c, ggml.c) built without unwind tables, so an exception could
# neither reach a catch of ours nor unwind safely. Instead this patch
# *poisons* the connection (a flag, no unwinding at all):
#  * the first failure marks the dispatcher lost (sticky), records why, closes
#    its socket (so a still-running server can serve its next client) and
#    marks the endpoint lost process-wide;
#  * from then on every command completes at once without network I/O and
#    with a zero-filled reply: alloc_buffer returns NULL, reads give zeros,
#    writes are dropped, graph_compute returns GGML_STATUS_FAILED, and the
#    buffer base / buffer type fall back to harmless non-zero values so that
#    ggml's own asserts never fire;
#  * ggml-rs asks ggml_backend_rpc_rs_{backend,buffer,endpoint}_lost() after
#    every compute, tensor read and tensor write, and reports an error naming
#    the endpoint (zeros are never handed out as results);
#  * a lost endpoint is not reconnected (enumeration never blocks on it) until
#    ggml_backend_rpc_rs_endpoint_reset(); then the next use connects afresh.
#    Buffers and backends made over the old connection stay lost for good
#    (the server's memory went with it).
# Before each command the client also checks, without blocking, whether the
# server has closed the connection, so a server stopped between two computes
# fails the next compute (graph computes are sent without awaiting a reply).
# The transport also gets MSG_NOSIGNAL (a write to a closed peer is EPIPE, not
# a SIGPIPE that kills a C or Go host process) and TCP keepalive with a user
# timeout on Linux (a host that vanishes without closing the connection is
# detected in about 30 s instead of hanging a compute forever).
# Usage: 02-rpc-no-abort.sh GGML_DIR   (idempotent)
set -euo pipefail
dir="$1/src/ggml-rpc"
python3 - "$dir/ggml-rpc.cpp" "$dir/transport.cpp" "$dir/transport.h" <<'PY'
import sys

MARK = "ggml-rs patch 02-rpc-no-abort"

def patch(path, edits):
    src = open(path).read()
    if MARK in src:
        return
    for old, new in edits:
        n = src.count(old)
        if n != 1:
            sys.exit(f"02-rpc-no-abort: expected one match in {path}, found {n}:\n{old}")
        src = src.replace(old, new)
    open(path, "w").write(src)

rpc, transport, transport_h = sys.argv[1], sys.argv[2], sys.argv[3]

LOST_REGISTRY = r'''
// ggml-rs patch 02-rpc-no-abort: lost connections poison their dispatcher
// instead of aborting (see scripts/patches/02-rpc-no-abort.sh for the design).
// Endpoints whose connection was lost, with the reason; cleared by
// ggml_backend_rpc_rs_endpoint_reset().
static std::mutex & rs_lost_mutex() {
    static std::mutex m;
    return m;
}
static std::unordered_map<std::string, std::string> & rs_lost_endpoints() {
    static std::unordered_map<std::string, std::string> m;
    return m;
}
static void rs_mark_endpoint_lost(const std::string & endpoint, const std::string & why) {
    std::lock_guard<std::mutex> lock(rs_lost_mutex());
    rs_lost_endpoints()[endpoint] = why;
}
static bool rs_endpoint_is_lost(const std::string & endpoint, std::string * why) {
    std::lock_guard<std::mutex> lock(rs_lost_mutex());
    auto it = rs_lost_endpoints().find(endpoint);
    if (it == rs_lost_endpoints().end()) {
        return false;
    }
    if (why) {
        *why = it->second;
    }
    return true;
}
static void rs_copy_reason(const std::string & why, char * buf, size_t size) {
    if (buf != nullptr && size > 0) {
        snprintf(buf, size, "%s", why.c_str());
    }
}
static const char * rs_cmd_name(int cmd) {
    switch (cmd) {
        case RPC_CMD_ALLOC_BUFFER:      return "ALLOC_BUFFER";
        case RPC_CMD_GET_ALIGNMENT:     return "GET_ALIGNMENT";
        case RPC_CMD_GET_MAX_SIZE:      return "GET_MAX_SIZE";
        case RPC_CMD_BUFFER_GET_BASE:   return "BUFFER_GET_BASE";
        case RPC_CMD_FREE_BUFFER:       return "FREE_BUFFER";
        case RPC_CMD_BUFFER_CLEAR:      return "BUFFER_CLEAR";
        case RPC_CMD_SET_TENSOR:        return "SET_TENSOR";
        case RPC_CMD_SET_TENSOR_HASH:   return "SET_TENSOR_HASH";
        case RPC_CMD_GET_TENSOR:        return "GET_TENSOR";
        case RPC_CMD_COPY_TENSOR:       return "COPY_TENSOR";
        case RPC_CMD_GRAPH_COMPUTE:     return "GRAPH_COMPUTE";
        case RPC_CMD_GET_DEVICE_MEMORY: return "GET_DEVICE_MEMORY";
        case RPC_CMD_INIT_TENSOR:       return "INIT_TENSOR";
        case RPC_CMD_GET_ALLOC_SIZE:    return "GET_ALLOC_SIZE";
        case RPC_CMD_DEVICE_COUNT:      return "DEVICE_COUNT";
        case RPC_CMD_GRAPH_RECOMPUTE:   return "GRAPH_RECOMPUTE";
        case RPC_CMD_MEMSET_TENSOR:     return "MEMSET_TENSOR";
        default:                        return "a command";
    }
}

class rpc_dispatcher {
'''

DISPATCHER_METHODS = r'''// ggml-rs patch 02-rpc-no-abort: poisoned-connection helpers.
void rpc_dispatcher::enqueue(const rpc_msg_ptr & msg) {
    if (is_lost) {
        // lost: complete at once, with a zero-filled reply
        if (msg->output) {
            memset(msg->output, 0, msg->output_size);
        }
        msg->completion.set_value();
        return;
    }
    GGML_ASSERT(queue.push(msg));
}

void rpc_dispatcher::fail(const std::string & why, bool log) {
    {
        std::lock_guard<std::mutex> lock(reason_mutex);
        reason = why;
    }
    is_lost = true;
    rs_mark_endpoint_lost(endpoint_name, why);
    if (log) {
        GGML_LOG_ERROR("RPC server %s lost: %s\n", endpoint_name.c_str(), why.c_str());
    }
}

std::string rpc_dispatcher::lost_reason() {
    std::lock_guard<std::mutex> lock(reason_mutex);
    return reason;
}

void rpc_dispatcher::start_lost(const std::string & endpoint, const std::string & why) {
    endpoint_name = endpoint;
    fail(why, false);
}

void rpc_dispatcher::send(enum rpc_cmd cmd, std::shared_ptr<const void> input, size_t input_size) {
'''

START_OLD = r'''void rpc_dispatcher::start(const std::string & endpoint) {
    std::string host;
    int port;
    if (!parse_endpoint(endpoint, host, port)) {
        GGML_ABORT("Failed to parse endpoint: %s\n", endpoint.c_str());
    }
    if (!rpc_transport_init()) {
        GGML_ABORT("RPC transport initialization failed\n");
    }

    sock = socket_t::connect(host.c_str(), port);
    if (sock == nullptr) {
        GGML_ABORT("Failed to connect to %s\n", endpoint.c_str());
    }
    if (!negotiate_hello(sock)) {
        GGML_ABORT("RPC handshake failed for %s\n", endpoint.c_str());
    }
'''
START_NEW = r'''void rpc_dispatcher::start(const std::string & endpoint) {
    // ggml-rs patch 02-rpc-no-abort: failures poison the dispatcher (no worker
    // thread is started; every command completes at once) instead of aborting.
    endpoint_name = endpoint;
    std::string host;
    int port;
    if (!parse_endpoint(endpoint, host, port)) {
        fail("cannot parse the endpoint (want host:port)", true);
        return;
    }
    if (!rpc_transport_init()) {
        fail("RPC transport initialization failed", true);
        return;
    }

    sock = socket_t::connect(host.c_str(), port);
    if (sock == nullptr) {
        fail("cannot connect", true);
        return;
    }
    if (!negotiate_hello(sock)) {
        sock = nullptr;
        fail("handshake failed (not a ggml RPC server, or an incompatible protocol version)", true);
        return;
    }
'''

WORK_OLD = r'''        if (msg_ptr->cmd != RPC_CMD_NONE) {
            if (msg_ptr->output) {
                bool status = send_rpc_cmd(sock, msg_ptr->cmd, msg_ptr->input.get(), msg_ptr->input_size, msg_ptr->output, msg_ptr->output_size);
                RPC_STATUS_ASSERT(status);
            } else {
                bool status = send_rpc_cmd(sock, msg_ptr->cmd, msg_ptr->input.get(), msg_ptr->input_size);
                RPC_STATUS_ASSERT(status);
            }
        }
        msg_ptr->completion.set_value();
'''
WORK_NEW = r'''        // ggml-rs patch 02-rpc-no-abort: a failed command poisons the
        // connection; later commands skip the network and reply with zeros.
        if (msg_ptr->cmd != RPC_CMD_NONE && !is_lost) {
            // A server stopped since the last command has closed the
            // connection: notice it now, not only when a reply is awaited
            // (graph computes are sent without waiting for one).
            const bool closed = sock->rs_peer_closed();
            bool status = false;
            if (closed) {
                fail(std::string("the server closed the connection (noticed before ") + rs_cmd_name(msg_ptr->cmd) + ")", true);
            } else if (msg_ptr->output) {
                status = send_rpc_cmd(sock, msg_ptr->cmd, msg_ptr->input.get(), msg_ptr->input_size, msg_ptr->output, msg_ptr->output_size);
            } else {
                status = send_rpc_cmd(sock, msg_ptr->cmd, msg_ptr->input.get(), msg_ptr->input_size);
            }
            if (!status) {
                if (!closed) {
                    fail(std::string("connection lost during ") + rs_cmd_name(msg_ptr->cmd) +
                         " (the server stopped, or sent a malformed reply)", true);
                }
                sock = nullptr; // only this thread uses the socket once started
            }
        }
        if (is_lost && msg_ptr->output) {
            memset(msg_ptr->output, 0, msg_ptr->output_size);
        }
        msg_ptr->completion.set_value();
'''

DTOR_OLD = r'''    running = false;
    queue.interrupt();
    sock = nullptr;
    if (thread.joinable()) {
        thread.join();
    }
'''
DTOR_NEW = r'''    running = false;
    queue.interrupt();
    // ggml-rs patch 02-rpc-no-abort: join first, the worker may reset the socket
    if (thread.joinable()) {
        thread.join();
    }
    sock = nullptr;
'''

GETD_OLD = r'''    auto it = dispatchers.find(endpoint);
    if (it != dispatchers.end()) {
        if (auto dispatcher = it->second.lock()) {
            return dispatcher;
        }
    }

    auto dispatcher = std::make_shared<rpc_dispatcher>();
    dispatcher->start(endpoint);
'''
GETD_NEW = r'''    // ggml-rs patch 02-rpc-no-abort: while an endpoint is marked lost, hand
    // out a lost dispatcher without touching the network; after a reset,
    // replace a lost dispatcher with a fresh connection.
    std::string why;
    const bool endpoint_lost = rs_endpoint_is_lost(endpoint, &why);
    auto it = dispatchers.find(endpoint);
    if (it != dispatchers.end()) {
        if (auto dispatcher = it->second.lock()) {
            if (!dispatcher->lost() || endpoint_lost) {
                return dispatcher;
            }
        }
    }

    auto dispatcher = std::make_shared<rpc_dispatcher>();
    if (endpoint_lost) {
        dispatcher->start_lost(endpoint, why);
    } else {
        dispatcher->start(endpoint);
    }
'''

EXPORTS = r'''
// ggml-rs patch 02-rpc-no-abort: queries for the poisoned-connection scheme.
// Each returns true when the connection is lost and writes the reason
// (NUL-terminated, truncated) into `reason` when it is non-NULL.
extern "C" bool ggml_backend_rpc_rs_backend_lost(ggml_backend_t backend, char * reason, size_t size) {
    if (!ggml_backend_is_rpc(backend)) {
        return false;
    }
    ggml_backend_rpc_context * ctx = (ggml_backend_rpc_context *)backend->context;
    if (!ctx->dispatcher->lost()) {
        return false;
    }
    rs_copy_reason(ctx->dispatcher->lost_reason(), reason, size);
    return true;
}

extern "C" bool ggml_backend_rpc_rs_buffer_lost(ggml_backend_buffer_t buffer, char * reason, size_t size) {
    if (buffer == nullptr || !ggml_backend_buffer_is_rpc(buffer)) {
        return false;
    }
    ggml_backend_rpc_buffer_context * ctx = (ggml_backend_rpc_buffer_context *)buffer->context;
    if (ctx == nullptr || !ctx->dispatcher->lost()) {
        return false;
    }
    rs_copy_reason(ctx->dispatcher->lost_reason(), reason, size);
    return true;
}

extern "C" bool ggml_backend_rpc_rs_endpoint_lost(const char * endpoint, char * reason, size_t size) {
    std::string why;
    if (endpoint == nullptr || !rs_endpoint_is_lost(endpoint, &why)) {
        return false;
    }
    rs_copy_reason(why, reason, size);
    return true;
}

// Forget that `endpoint` was lost: its next use connects afresh.
extern "C" void ggml_backend_rpc_rs_endpoint_reset(const char * endpoint) {
    if (endpoint == nullptr) {
        return;
    }
    std::lock_guard<std::mutex> lock(rs_lost_mutex());
    rs_lost_endpoints().erase(endpoint);
}

GGML_BACKEND_DL_IMPL(ggml_backend_rpc_reg)'''

rpc_edits = [
    # the handshake reports failure instead of aborting
    ('''    bool status = send_rpc_cmd(sock, RPC_CMD_HELLO, &request, sizeof(request), &response, sizeof(response));
    RPC_STATUS_ASSERT(status);
''', '''    bool status = send_rpc_cmd(sock, RPC_CMD_HELLO, &request, sizeof(request), &response, sizeof(response));
    if (!status) {
        return false; // ggml-rs patch 02-rpc-no-abort
    }
'''),
    ("\nclass rpc_dispatcher {\n", LOST_REGISTRY),
    ('''    ~rpc_dispatcher();

private:
''', '''    ~rpc_dispatcher();

    // ggml-rs patch 02-rpc-no-abort
    bool        lost() const { return is_lost.load(); }
    std::string lost_reason();
    void        start_lost(const std::string & endpoint, const std::string & why);

private:
'''),
    ('''    std::thread      thread;
};
''', '''    std::thread      thread;

    // ggml-rs patch 02-rpc-no-abort
    void             enqueue(const rpc_msg_ptr & msg);
    void             fail(const std::string & why, bool log);
    std::atomic_bool is_lost{false};
    std::mutex       reason_mutex;
    std::string      reason;
    std::string      endpoint_name;
};
'''),
    ("void rpc_dispatcher::send(enum rpc_cmd cmd, std::shared_ptr<const void> input, size_t input_size) {\n", DISPATCHER_METHODS),
    (START_OLD, START_NEW),
    (WORK_OLD, WORK_NEW),
    (DTOR_OLD, DTOR_NEW),
    (GETD_OLD, GETD_NEW),
    # a lost server's zero base pointer would trip ggml's "base cannot be NULL" assert
    ('''    ctx->base_ptr = reinterpret_cast<void *>(response.base_ptr);
    return ctx->base_ptr;
''', '''    ctx->base_ptr = reinterpret_cast<void *>(response.base_ptr);
    if (ctx->base_ptr == nullptr) {
        // ggml-rs patch 02-rpc-no-abort: lost connection (zero-filled reply);
        // any non-NULL address will do, nothing on this buffer reaches a server
        ctx->base_ptr = reinterpret_cast<void *>((uintptr_t) 0x10000000);
    }
    return ctx->base_ptr;
'''),
    # never cache a lost server's zero answers
    ('''            cache[cache_hash] = response.alloc_size;
''', '''            if (!dispatcher->lost()) { // ggml-rs patch 02-rpc-no-abort
                cache[cache_hash] = response.alloc_size;
            }
'''),
    ('''    size_t max_size = get_max_size(dispatcher, device);
''', '''    size_t max_size = get_max_size(dispatcher, device);
    // ggml-rs patch 02-rpc-no-abort: a lost server answered zeros; use sane
    // values (ggml asserts on alignment 0) and do not cache this buffer type
    const bool rs_lost = dispatcher->lost();
    if (rs_lost) {
        alignment = 128;
        max_size  = SIZE_MAX;
    }
'''),
    ('''        /* .device  = */ ggml_backend_reg_dev_get(reg, device),
        /* .context = */ buft_ctx
    };
    buft_map[buft_name] = buft;
''', '''        /* .device  = */ reg ? ggml_backend_reg_dev_get(reg, device) : nullptr,
        /* .context = */ buft_ctx
    };
    if (!rs_lost) {
        buft_map[buft_name] = buft;
    }
'''),
    ('''    auto reg = ggml_backend_rpc_add_server(endpoint);
    ggml_backend_t backend = new ggml_backend {
''', '''    auto reg = ggml_backend_rpc_add_server(endpoint);
    if (reg == nullptr) { // ggml-rs patch 02-rpc-no-abort: unknown or lost server
        delete ctx;
        return nullptr;
    }
    ggml_backend_t backend = new ggml_backend {
'''),
    ('''    GGML_ASSERT(cgraph->n_nodes > 0);
    bool reuse =''', '''    GGML_ASSERT(cgraph->n_nodes > 0);
    if (rpc_ctx->dispatcher->lost()) { // ggml-rs patch 02-rpc-no-abort
        rpc_dev_ctx->last_graph_uid = 0;
        return GGML_STATUS_FAILED;
    }
    bool reuse ='''),
    ("\nGGML_BACKEND_DL_IMPL(ggml_backend_rpc_reg)", EXPORTS),
]
# every queue push goes through enqueue(), which short-circuits when lost
src = open(rpc).read()
if MARK not in src:
    n = src.count("GGML_ASSERT(queue.push(msg));") + src.count("GGML_ASSERT(queue.push(ev->msg));")
    if n != 7:
        sys.exit(f"02-rpc-no-abort: expected 7 queue pushes in {rpc}, found {n}")
    src = src.replace("GGML_ASSERT(queue.push(msg));", "enqueue(msg);")
    src = src.replace("GGML_ASSERT(queue.push(ev->msg));", "enqueue(ev->msg);")
    open(rpc, "w").write(src)
patch(rpc, rpc_edits)
# enqueue() itself pushes with the original assert
src = open(rpc).read()
if src.count("GGML_ASSERT(queue.push(msg));") != 1 or "RPC_STATUS_ASSERT(status)" in src:
    sys.exit("02-rpc-no-abort: unexpected leftover aborts in ggml-rpc.cpp")

transport_edits = [
    ('''static const char * RPC_DEBUG = std::getenv("GGML_RPC_DEBUG");
''', '''static const char * RPC_DEBUG = std::getenv("GGML_RPC_DEBUG");

// ggml-rs patch 02-rpc-no-abort: a write to a closed connection must fail with
// EPIPE, not raise SIGPIPE (which kills C hosts and non-Go threads of Go hosts).
#if defined(MSG_NOSIGNAL)
#  define GGML_RS_SEND_FLAGS MSG_NOSIGNAL
#else
#  define GGML_RS_SEND_FLAGS 0
#endif
'''),
    ('''        ssize_t n = send(fd, (const char *)data + bytes_sent, size_to_send, 0);
''', '''        ssize_t n = send(fd, (const char *)data + bytes_sent, size_to_send, GGML_RS_SEND_FLAGS);
'''),
    ('''static bool set_reuse_addr(sockfd_t sockfd) {
''', '''// ggml-rs patch 02-rpc-no-abort: no SIGPIPE (macOS), and keepalive probes so
// that a peer host that vanishes without closing the connection is noticed
// (about 30 s on Linux) instead of blocking a recv() forever. Probes are
// answered by the peer's kernel, so a long compute is not cut short.
static void rs_socket_options(sockfd_t sockfd) {
#ifndef _WIN32
    int one = 1;
#  if defined(SO_NOSIGPIPE)
    setsockopt(sockfd, SOL_SOCKET, SO_NOSIGPIPE, &one, sizeof(one));
#  endif
    setsockopt(sockfd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
#  if defined(__linux__)
    int idle = 10, interval = 5, count = 4;
    unsigned int user_timeout_ms = 30000;
    setsockopt(sockfd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
    setsockopt(sockfd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof(interval));
    setsockopt(sockfd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof(count));
    setsockopt(sockfd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout_ms, sizeof(user_timeout_ms));
#  endif
#else
    (void) sockfd;
#endif
}

static bool set_reuse_addr(sockfd_t sockfd) {
'''),
    ('''    return socket_ptr(new socket_t(std::make_unique<impl>(client_socket_fd)));
''', '''    rs_socket_options(client_socket_fd); // ggml-rs patch 02-rpc-no-abort
    return socket_ptr(new socket_t(std::make_unique<impl>(client_socket_fd)));
'''),
    ('''    if (::connect(sockfd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
        return nullptr;
    }
''', '''    if (::connect(sockfd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
        return nullptr;
    }
    rs_socket_options(sockfd); // ggml-rs patch 02-rpc-no-abort
'''),
    ('''bool socket_t::flush() {
    return pimpl->flush();
}
''', '''bool socket_t::flush() {
    return pimpl->flush();
}

// ggml-rs patch 02-rpc-no-abort: whether the peer has closed the connection
// (end of stream or an error pending), checked without blocking and without
// consuming data. The client calls it before each command.
#ifndef _WIN32
#  include <poll.h>
#endif
#include <cerrno>
bool socket_t::rs_peer_closed() {
#ifdef _WIN32
    return false;
#else
    if (pimpl->use_rdma) {
        return false;
    }
    struct pollfd p = {};
    p.fd     = pimpl->fd;
    p.events = POLLIN;
    if (poll(&p, 1, 0) <= 0) {
        return false;
    }
    if (p.revents & (POLLERR | POLLHUP | POLLNVAL)) {
        return true;
    }
    char c;
    ssize_t n = recv(pimpl->fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
#endif
}
'''),
]
patch(transport, transport_edits)
patch(transport_h, [
    ('''    bool flush();
''', '''    bool flush();
    // ggml-rs patch 02-rpc-no-abort: the peer closed the connection (non-blocking check)
    bool rs_peer_closed();
'''),
])
PY
grep -q "ggml-rs patch 02-rpc-no-abort" "$dir/ggml-rpc.cpp"
grep -q "ggml-rs patch 02-rpc-no-abort" "$dir/transport.cpp"
grep -q "ggml-rs patch 02-rpc-no-abort" "$dir/transport.h"
