package backend

import (
	"strings"
	"testing"
	"time"

	"github.com/ggml-rs/ggml-rs/go/ml"
)

func TestCancelComputeInProgress(t *testing.T) {
	b := newBackend(t, ml.BackendParams{AllocMemory: true, NumThreads: 2})
	// A chain of matmuls long enough that the cancel lands well inside it
	// even on a loaded machine: doubled until the graph takes 150 ms (a
	// fixed delay fails on a machine fast enough to finish first).
	var (
		ctx  ml.Context
		x    ml.Tensor
		full time.Duration
	)
	for n := 400; ; n *= 2 {
		ctx = b.NewContextSize(2*n + 16)
		in := ctx.Input()
		w := in.FromFloats(make([]float32, 256*256), 256, 256)
		x = in.FromFloats(make([]float32, 256*64), 256, 64)
		for i := 0; i < n; i++ {
			x = w.Mulmat(ctx, x)
		}
		ctx.Forward(x).Compute(x) // warm-up
		start := time.Now()
		ctx.Compute(x)
		full = time.Since(start)
		if full >= 150*time.Millisecond || n >= 3200 {
			break
		}
		ctx.Close()
	}
	defer ctx.Close()
	go func() {
		time.Sleep(full / 8)
		b.(*Backend).Cancel()
	}()
	start := time.Now()
	r := mustPanic(t, func() { ctx.Compute(x) }, "cancelled")
	if e, ok := r.(*Error); !ok || e.Status != StatusAborted {
		t.Fatalf("panic %#v, want *Error with StatusAborted", r)
	}
	if d := time.Since(start); d > full*3/4 {
		t.Errorf("cancel after %v took %v of a %v graph", full/8, d, full)
	}
	// The backend stays usable: the same graph computes to the end.
	ctx.Forward(x).Compute(x)
	if got := x.Floats(); len(got) != 256*64 || got[0] != 0 {
		t.Errorf("after cancel: %d values, first %v", len(got), got[:1])
	}
	if !strings.Contains(r.(*Error).Message, "compute") {
		t.Errorf("message %q", r.(*Error).Message)
	}
}
