//go:build cgo && !ggml_vulkan && !ggml_cuda

package backend

// The default library: CPU (and RPC) backends only. pkg-config finds it:
// installed (make install: ggml-rs.pc under PREFIX/lib/pkgconfig), or,
// inside this repository, the build in target/ (make build writes
// target/pkgconfig/ggml-rs.pc; the Makefile puts that folder on
// PKG_CONFIG_PATH). --static adds the C++ runtime and system libraries an
// archive needs; the linker takes the shared library where one is
// installed beside the archive.

/*
#cgo pkg-config: --static ggml-rs
*/
import "C"
