//go:build !ggml_vulkan

package backend

// The default library: CPU (and RPC) backends only (make build).

/*
#cgo LDFLAGS: ${SRCDIR}/../../../target/static/libggml_rs.a -lstdc++ -lm -ldl -lpthread
*/
import "C"
