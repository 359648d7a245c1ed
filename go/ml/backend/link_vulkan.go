//go:build ggml_vulkan

package backend

// The library built with ggml's Vulkan backend (make vulkan-build, which
// points target/vulkan at its cached build): go build -tags ggml_vulkan.
// ggml-vulkan hides CPU-type Vulkan devices (Mesa's llvmpipe) unless
// GGML_VK_VISIBLE_DEVICES names them.

/*
#cgo LDFLAGS: ${SRCDIR}/../../../target/vulkan/libggml_rs.a -lvulkan -lstdc++ -lm -ldl -lpthread
*/
import "C"
