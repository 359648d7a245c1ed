// Package oursfirst links libggml_rs.a before the twin ggml (package twoggml).
package oursfirst

/*
#cgo CFLAGS: -I${SRCDIR}/.. -I${SRCDIR}/../../../../include -I${SRCDIR}/../../../../vendor/ggml/include
#cgo LDFLAGS: ${SRCDIR}/../../../../target/static/libggml_rs.a ${SRCDIR}/../../../../target/twin-ggml/libggml-twin.a -lstdc++ -lm -ldl -lpthread
#include "use.h"
*/
import "C"

import "github.com/ggml-rs/ggml-rs/go/internal/twoggml"

// Sides is this link order's view of the two ggmls.
var Sides = twoggml.Sides{
	TwinVersion:      func() string { return C.GoString(C.ggml_version()) },
	OursVersion:      func() string { return C.GoString(C.ggml_rs_ggml_version()) },
	TwinGraphNodes:   func() int { return int(C.twin_graph_nodes()) },
	OursProductError: func() float64 { return float64(C.ours_product_error()) },
}
