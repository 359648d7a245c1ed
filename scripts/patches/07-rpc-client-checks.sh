#!/usr/bin/env bash
# ggml's RPC client trusts every number a server sends back. A broken or
# hostile server could kill the client process (or hang it) with one reply:
#  * a buffer smaller than asked for, an alignment of 3 or 2^40, an
#    unaligned or wrapping buffer base: ggml's allocator aborts;
#  * 2^32-1 devices: enumeration loops creating devices until memory runs out;
#  * an absurd allocation size: offsets overflow in ggml's allocator;
#  * no reply at all: the client blocks in recv() for ever.
# This patch checks each reply before it is used. A reply that breaks the
# protocol's rules is a protocol violation: the connection is poisoned the
# way 02-rpc-no-abort.sh poisons a lost one (so ggml-rs reports
# "RPC server … lost: protocol violation: …" and nothing is aborted), and
# the value is replaced by a harmless one. The rules:
#  * DEVICE_COUNT <= 64;
#  * GET_ALIGNMENT a power of two <= 64 KiB; GET_MAX_SIZE >= the alignment;
#  * ALLOC_BUFFER: a buffer at least as large as asked for (the client uses
#    the size it asked for; a smaller one is freed on the server again);
#  * BUFFER_GET_BASE: non-NULL, aligned, and base + size does not wrap;
#  * GET_ALLOC_SIZE <= 2^48 bytes;
#  * GET_DEVICE_MEMORY: free is clamped to total.
# Client sockets also get a reply timeout (SO_RCVTIMEO/SO_SNDTIMEO, default
# 600 s, ggml_backend_rpc_rs_set_reply_timeout(); 0 = none): a server that
# accepts a command and never answers fails that command instead of hanging
# the client. A graph compute's reply is awaited by the next command that
# reads, so the timeout bounds one graph's compute time on the server.
# Usage: 07-rpc-client-checks.sh GGML_DIR   (idempotent; after 02)
set -euo pipefail
dir="$1/src/ggml-rpc"
python3 - "$dir/ggml-rpc.cpp" "$dir/transport.cpp" "$dir/transport.h" <<'PY'
import sys

MARK = "ggml-rs patch 07-rpc-client-checks"

def patch(path, edits):
    src = open(path).read()
    if MARK in src:
        return
    for old, new in edits:
        n = src.count(old)
        if n != 1:
            sys.exit(f"07-rpc-client-checks: expected one match in {path}, found {n}:\n{old}")
        src = src.replace(old, new)
    open(path, "w").write(src)

rpc, transport, transport_h = sys.argv[1], sys.argv[2], sys.argv[3]

LIMITS = r'''
// ggml-rs patch 07-rpc-client-checks: what a server's replies may say.
static const uint32_t RS_MAX_DEVICES    = 64;
static const size_t   RS_MAX_ALIGNMENT  = 64 * 1024;
static const uint64_t RS_MAX_ALLOC_SIZE = 1ull << 48;

class rpc_dispatcher {
'''

rpc_edits = [
    ("\nclass rpc_dispatcher {\n", LIMITS),
    # a public way to poison the connection on a bad reply
    ('''    void        start_lost(const std::string & endpoint, const std::string & why);
''', '''    void        start_lost(const std::string & endpoint, const std::string & why);
    // ggml-rs patch 07-rpc-client-checks: a reply broke the protocol's rules
    void        rs_reject(const std::string & why) {
        if (!is_lost) {
            fail("protocol violation: " + why, true);
        }
    }
'''),
    # a timed-out reply says so
    ('''                if (!closed) {
                    fail(std::string("connection lost during ") + rs_cmd_name(msg_ptr->cmd) +
                         " (the server stopped, or sent a malformed reply)", true);
                }
''', '''                if (!closed && rs_transport_timed_out()) { // ggml-rs patch 07-rpc-client-checks
                    fail(std::string("no reply to ") + rs_cmd_name(msg_ptr->cmd) + " within " +
                         std::to_string(rs_reply_timeout_seconds()) + " s", true);
                } else if (!closed) {
                    fail(std::string("connection lost during ") + rs_cmd_name(msg_ptr->cmd) +
                         " (the server stopped, or sent a malformed reply)", true);
                }
'''),
    # ALLOC_BUFFER: never smaller than asked for
    ('''    dispatcher->send(RPC_CMD_ALLOC_BUFFER, request, sizeof(*request), &response, sizeof(response));
    if (response.remote_ptr != 0) {
        ggml_backend_buffer_t buffer = ggml_backend_buffer_init(buft,
            ggml_backend_rpc_buffer_interface,
            new ggml_backend_rpc_buffer_context{dispatcher, nullptr, response.remote_ptr},
            response.remote_size);
''', '''    dispatcher->send(RPC_CMD_ALLOC_BUFFER, request, sizeof(*request), &response, sizeof(response));
    if (response.remote_ptr != 0 && response.remote_size < size) {
        // ggml-rs patch 07-rpc-client-checks: ggml's allocator would place
        // tensors past the end; give the buffer back and fail
        auto free_request = std::make_shared<rpc_msg_free_buffer_req>();
        free_request->remote_ptr = response.remote_ptr;
        dispatcher->send(RPC_CMD_FREE_BUFFER, free_request, sizeof(*free_request));
        dispatcher->rs_reject("ALLOC_BUFFER of " + std::to_string(size) + " bytes returned a buffer of " +
                              std::to_string(response.remote_size) + " bytes");
        return nullptr;
    }
    if (response.remote_ptr != 0) {
        // ggml-rs patch 07-rpc-client-checks: the client uses what it asked for
        ggml_backend_buffer_t buffer = ggml_backend_buffer_init(buft,
            ggml_backend_rpc_buffer_interface,
            new ggml_backend_rpc_buffer_context{dispatcher, nullptr, response.remote_ptr},
            size);
'''),
    # BUFFER_GET_BASE: non-NULL, aligned, no wrap-around
    ('''    ctx->base_ptr = reinterpret_cast<void *>(response.base_ptr);
    if (ctx->base_ptr == nullptr) {
''', '''    ctx->base_ptr = reinterpret_cast<void *>(response.base_ptr);
    if (!ctx->dispatcher->lost()) { // ggml-rs patch 07-rpc-client-checks
        const size_t   align = ((ggml_backend_rpc_buffer_type_context *)buffer->buft->context)->alignment;
        const uint64_t base  = response.base_ptr;
        const char * bad = base == 0                                 ? "is NULL"
                         : base % align != 0                         ? "is not aligned to the device's alignment"
                         : base > (uint64_t) UINTPTR_MAX - buffer->size ? "wraps around the address space"
                         : nullptr;
        if (bad != nullptr) {
            ctx->dispatcher->rs_reject("BUFFER_GET_BASE returned " + std::to_string(base) + ", which " + bad);
            ctx->base_ptr = nullptr;
        }
    }
    if (ctx->base_ptr == nullptr) {
'''),
    # GET_ALLOC_SIZE: bounded
    ('''        dispatcher->send(RPC_CMD_GET_ALLOC_SIZE, request, sizeof(*request), &response, sizeof(response));
''', '''        dispatcher->send(RPC_CMD_GET_ALLOC_SIZE, request, sizeof(*request), &response, sizeof(response));
        if (response.alloc_size > RS_MAX_ALLOC_SIZE) { // ggml-rs patch 07-rpc-client-checks
            dispatcher->rs_reject("GET_ALLOC_SIZE returned " + std::to_string(response.alloc_size) + " bytes");
        }
        if (dispatcher->lost()) {
            response.alloc_size = 0; // the tensor's own size is used
        }
'''),
    # GET_ALIGNMENT and GET_MAX_SIZE: sane before the buffer type is made
    ('''    size_t max_size = get_max_size(dispatcher, device);
''', '''    size_t max_size = get_max_size(dispatcher, device);
    // ggml-rs patch 07-rpc-client-checks: ggml's allocator needs a power of two
    if (alignment == 0 || (alignment & (alignment - 1)) != 0 || alignment > RS_MAX_ALIGNMENT) {
        dispatcher->rs_reject("GET_ALIGNMENT returned " + std::to_string(alignment) +
                              " (want a power of two up to " + std::to_string(RS_MAX_ALIGNMENT) + ")");
    } else if (max_size < alignment) {
        dispatcher->rs_reject("GET_MAX_SIZE returned " + std::to_string(max_size) + " (less than the alignment)");
    }
'''),
    # GET_DEVICE_MEMORY: free <= total
    ('''    *free = response.free_mem;
    *total = response.total_mem;
''', '''    *free = response.free_mem;
    *total = response.total_mem;
    if (*free > *total) { // ggml-rs patch 07-rpc-client-checks
        *free = *total;
    }
'''),
    # DEVICE_COUNT: bounded
    ('''    dispatcher->send(RPC_CMD_DEVICE_COUNT, nullptr, 0, &response, sizeof(response));
    return response.device_count;
''', '''    dispatcher->send(RPC_CMD_DEVICE_COUNT, nullptr, 0, &response, sizeof(response));
    if (response.device_count > RS_MAX_DEVICES) { // ggml-rs patch 07-rpc-client-checks
        dispatcher->rs_reject("DEVICE_COUNT returned " + std::to_string(response.device_count) +
                              " (at most " + std::to_string(RS_MAX_DEVICES) + " are accepted)");
        return 0;
    }
    return response.device_count;
'''),
]
patch(rpc, rpc_edits)

transport_edits = [
    ('''#  define GGML_RS_SEND_FLAGS 0
#endif
''', '''#  define GGML_RS_SEND_FLAGS 0
#endif

#include <atomic>
#include <cerrno>
// ggml-rs patch 07-rpc-client-checks: client sockets wait at most this long
// for a reply (or for room to send); 0 = no limit. Whether the last failed
// send or recv on this thread timed out.
static std::atomic<unsigned> rs_reply_timeout_s{600};
static thread_local bool     rs_timed_out = false;

unsigned rs_reply_timeout_seconds() {
    return rs_reply_timeout_s.load();
}

bool rs_transport_timed_out() {
    return rs_timed_out;
}

extern "C" void ggml_backend_rpc_rs_set_reply_timeout(unsigned seconds) {
    rs_reply_timeout_s.store(seconds);
}

static void rs_set_reply_timeout(sockfd_t sockfd) {
    const unsigned s = rs_reply_timeout_s.load();
    if (s == 0) {
        return;
    }
#ifdef _WIN32
    DWORD ms = s * 1000;
    setsockopt(sockfd, SOL_SOCKET, SO_RCVTIMEO, (const char *)&ms, sizeof(ms));
    setsockopt(sockfd, SOL_SOCKET, SO_SNDTIMEO, (const char *)&ms, sizeof(ms));
#else
    struct timeval tv = {};
    tv.tv_sec = s;
    setsockopt(sockfd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(sockfd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
#endif
}
'''),
    ('''    rs_socket_options(sockfd); // ggml-rs patch 02-rpc-no-abort
''', '''    rs_socket_options(sockfd); // ggml-rs patch 02-rpc-no-abort
    rs_set_reply_timeout(sockfd); // ggml-rs patch 07-rpc-client-checks
'''),
    ('''        ssize_t n = recv(fd, (char *)data + bytes_recv, size_to_recv, 0);
        if (n < 0) {
''', '''        ssize_t n = recv(fd, (char *)data + bytes_recv, size_to_recv, 0);
        rs_timed_out = n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK); // ggml-rs patch 07-rpc-client-checks
        if (n < 0) {
'''),
    ('''        ssize_t n = send(fd, (const char *)data + bytes_sent, size_to_send, GGML_RS_SEND_FLAGS);
''', '''        ssize_t n = send(fd, (const char *)data + bytes_sent, size_to_send, GGML_RS_SEND_FLAGS);
        rs_timed_out = n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK); // ggml-rs patch 07-rpc-client-checks
'''),
]
patch(transport, transport_edits)
src = open(transport_h).read()
if MARK not in src:
    src += '''
// ggml-rs patch 07-rpc-client-checks: the reply timeout of client sockets (s)
// and whether the calling thread's last failed send/recv timed out.
unsigned rs_reply_timeout_seconds();
bool     rs_transport_timed_out();
'''
    open(transport_h, "w").write(src)
PY
grep -q "ggml-rs patch 07-rpc-client-checks" "$dir/ggml-rpc.cpp"
grep -q "ggml-rs patch 07-rpc-client-checks" "$dir/transport.cpp"
grep -q "ggml-rs patch 07-rpc-client-checks" "$dir/transport.h"
