// ggml-rs's own C++ helpers over ggml internals that ggml's C API does not
// reach. Nothing here throws: every function is extern "C" and noexcept.
//
// ggml_rs_shim_device_with_memory: a device that behaves exactly like another
// one but reports a smaller memory size. The RPC server (ggml-rs-rpc-server
// --mem) serves it, so clients that place layers by free memory see the cap.

#include "ggml-backend-impl.h"

#include <algorithm>
#include <new>

namespace {

struct capped_device {
    ggml_backend_device dev;   // first member: a ggml_backend_dev_t points here
    ggml_backend_dev_t  inner; // the real device
    size_t              limit; // bytes reported as total memory
};

capped_device * as_capped(ggml_backend_dev_t dev) {
    return reinterpret_cast<capped_device *>(dev);
}

void capped_get_memory(ggml_backend_dev_t dev, size_t * free, size_t * total) {
    capped_device * c = as_capped(dev);
    c->inner->iface.get_memory(c->inner, free, total);
    *total = c->limit;
    *free  = std::min(*free, c->limit);
}

void capped_get_props(ggml_backend_dev_t dev, ggml_backend_dev_props * props) {
    capped_device * c = as_capped(dev);
    c->inner->iface.get_props(c->inner, props);
    capped_get_memory(dev, &props->memory_free, &props->memory_total);
}

ggml_backend_t capped_init_backend(ggml_backend_dev_t dev, const char * params) {
    capped_device * c = as_capped(dev);
    ggml_backend_t backend = c->inner->iface.init_backend(c->inner, params);
    if (backend != nullptr) {
        // so that ggml_backend_get_device() (which the RPC server asks for
        // the memory it reports) answers with the capped device
        backend->device = dev;
    }
    return backend;
}

} // namespace

// A device like `inner` whose memory is reported as at most `limit` bytes.
// Every other call goes to `inner`'s implementation with `inner`'s context.
// Returns NULL for a NULL device, a zero limit or when out of memory. The
// device lives until the process ends (ggml devices are never freed).
extern "C" ggml_backend_dev_t ggml_rs_shim_device_with_memory(ggml_backend_dev_t inner, size_t limit) noexcept {
    if (inner == nullptr || limit == 0 || inner->iface.get_memory == nullptr ||
        inner->iface.get_props == nullptr || inner->iface.init_backend == nullptr) {
        return nullptr;
    }
    capped_device * c = new (std::nothrow) capped_device;
    if (c == nullptr) {
        return nullptr;
    }
    c->dev = *inner;
    c->dev.iface.get_memory   = capped_get_memory;
    c->dev.iface.get_props    = capped_get_props;
    c->dev.iface.init_backend = capped_init_backend;
    c->inner = inner;
    c->limit = limit;
    return &c->dev;
}
