// Package backend implements github.com/ggml-rs/ggml-rs/go/ml's Backend, Context and Tensor on
// top of ggml-rs, a Rust library that drives a pinned upstream ggml and is
// reached through its C ABI (include/ggml_rs.h) only.
//
// Importing the package registers the "ggml" backend with
// ml.RegisterBackend, so ml.NewBackend works.
//
// Errors: Ollama's signatures return no errors, so a failing call panics.
// An op the library rejects panics with an *Error carrying the library's
// message (it names the op and the tensors); the context stays usable. An
// allocation that fails panics with ml.ErrNoMem, as in Ollama. Using a
// closed context, a tensor of a closed context, or a closed backend panics
// with an *Error of status StatusClosed.
package backend

/*
#include <stdlib.h>
#include "ggml_rs.h"
*/
import "C"

import (
	"github.com/ggml-rs/ggml-rs/go/ml"
)

func init() {
	ml.RegisterBackend("ggml", New)
	installLogger()
}

// Status is a ggml-rs result code (enum ggml_rs_status).
type Status int32

const (
	StatusOK              Status = C.GGML_RS_OK
	StatusInvalidArgument Status = C.GGML_RS_ERR_INVALID_ARGUMENT
	StatusShape           Status = C.GGML_RS_ERR_SHAPE
	StatusDType           Status = C.GGML_RS_ERR_DTYPE
	StatusOutOfMemory     Status = C.GGML_RS_ERR_OUT_OF_MEMORY
	StatusCompute         Status = C.GGML_RS_ERR_COMPUTE
	StatusAborted         Status = C.GGML_RS_ERR_ABORTED
	StatusClosed          Status = C.GGML_RS_ERR_CLOSED
	StatusIO              Status = C.GGML_RS_ERR_IO
	StatusFormat          Status = C.GGML_RS_ERR_FORMAT
	StatusPanic           Status = C.GGML_RS_ERR_PANIC
	StatusUnsupported     Status = C.GGML_RS_ERR_UNSUPPORTED
)

// Error is the panic value (or returned error) for a failed ggml-rs call.
type Error struct {
	Status  Status
	Message string
}

func (e *Error) Error() string { return "ggml-rs: " + e.Message }

// errorFrom converts a filled ggml_rs_error.
func errorFrom(e *C.ggml_rs_error) *Error {
	return &Error{Status: Status(e.status), Message: C.GoString(&e.message[0])}
}

func closedError(what string) *Error {
	return &Error{Status: StatusClosed, Message: what}
}
