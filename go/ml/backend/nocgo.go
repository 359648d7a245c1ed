//go:build !cgo

package backend

// Without cgo this package cannot link the ggml-rs library. Every other
// file of the package needs cgo, so a CGO_ENABLED=0 build stops here with
// this one error, whose name says what to do, instead of a wall of
// undefined symbols.
var _ = ggmlrs_ml_backend_needs_cgo__build_with_CGO_ENABLED_1_and_a_C_compiler
