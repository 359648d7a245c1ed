//go:build cgo && ggml_vulkan && !ggml_cuda

package backend

// The library built with ggml's Vulkan backend (go build -tags
// ggml_vulkan): pkg-config's ggml-rs-vulkan, installed (make install after
// make vulkan-build) or, inside this repository, target/pkgconfig's,
// pointing at the cached build (make vulkan-build). ggml-vulkan hides
// CPU-type Vulkan devices (Mesa's llvmpipe) unless GGML_VK_VISIBLE_DEVICES
// names them.

/*
#cgo pkg-config: --static ggml-rs-vulkan
*/
import "C"
