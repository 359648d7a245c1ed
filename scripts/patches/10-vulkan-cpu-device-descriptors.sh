#!/usr/bin/env bash
# On a CPU-type Vulkan device (Mesa's lavapipe/llvmpipe, the software
# device the tests run on where there is no GPU), every dispatch writes all
# bindings of its descriptor set, not only the ones its pipeline uses.
#
# Why: ggml-vulkan has one descriptor set layout of MAX_PARAMETER_COUNT (12)
# storage-buffer bindings for every pipeline and writes only the first
# parameter_count of them; the rest keep whatever an earlier dispatch put
# there, possibly a buffer destroyed since. Vulkan allows that (a binding
# the pipeline does not use may hold an invalid descriptor), but lavapipe of
# Mesa 22.3 (Debian bookworm) binds every descriptor of a set at each
# dispatch and takes a reference on its buffer: on a destroyed buffer's
# freed pipe_resource. Its refcount goes up and down on freed heap memory,
# and its last release frees it again: heap corruption ("corrupted size vs.
# prev_size", "malloc(): unsorted double linked list corrupted") or SIGSEGV
# in the driver's queue thread, seen once buffers had been freed and
# allocated again (a second backend or graph, a grown scratch buffer, the
# 32-row matrix paths). valgrind showed the double free of the buffer's
# pipe_resource in llvmpipe's launch_grid and the read after free in
# set_shader_buffers. The unused bindings are now filled with the first
# binding's buffer, which is alive. Real GPUs are not affected by this
# patch. docs/notes/vulkan.md.
# Usage: 10-vulkan-cpu-device-descriptors.sh GGML_DIR   (idempotent)
set -euo pipefail
python3 - "$1/src/ggml-vulkan/ggml-vulkan-common.h" <<'PY'
import sys

MARK = "ggml-rs patch 10-vulkan-cpu-device-descriptors"
path = sys.argv[1]
src = open(path).read()
if MARK in src:
    sys.exit(0)
old = '''    if (!same) {
        vk::WriteDescriptorSet write_descriptor_set{ descriptor_set, 0, 0, pipeline->parameter_count, vk::DescriptorType::eStorageBuffer, nullptr, descriptor_buffer_infos.begin() };'''
new = '''    if (!same) {
        // ggml-rs patch 10-vulkan-cpu-device-descriptors: lavapipe binds
        // every descriptor of the set, a stale one too (a destroyed
        // buffer); fill the unused bindings with the first, live buffer.
        std::array<vk::DescriptorBufferInfo, MAX_PARAMETER_COUNT> padded;
        uint32_t write_count = pipeline->parameter_count;
        const vk::DescriptorBufferInfo * write_infos = descriptor_buffer_infos.begin();
        if (ctx->device->properties.deviceType == vk::PhysicalDeviceType::eCpu && descriptor_buffer_infos.size() > 0) {
            size_t i = 0;
            for (const vk::DescriptorBufferInfo & info : descriptor_buffer_infos) {
                padded[i++] = info;
            }
            for (; i < MAX_PARAMETER_COUNT; i++) {
                padded[i] = *descriptor_buffer_infos.begin();
            }
            write_count = MAX_PARAMETER_COUNT;
            write_infos = padded.data();
        }
        vk::WriteDescriptorSet write_descriptor_set{ descriptor_set, 0, 0, write_count, vk::DescriptorType::eStorageBuffer, nullptr, write_infos };'''
n = src.count(old)
if n != 1:
    sys.exit(f"10-vulkan-cpu-device-descriptors: expected one match in {path}, found {n}")
open(path, "w").write(src.replace(old, new))
PY
