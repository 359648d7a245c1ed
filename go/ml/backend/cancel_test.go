package backend

import (
	"strings"
	"testing"
	"time"

	"ggmlrs/ml"
)

func TestCancelComputeInProgress(t *testing.T) {
	b := newBackend(t, ml.BackendParams{AllocMemory: true, NumThreads: 2})
	ctx := b.NewContext()
	defer ctx.Close()
	in := ctx.Input()
	w := in.FromFloats(make([]float32, 256*256), 256, 256)
	x := in.FromFloats(make([]float32, 256*64), 256, 64)
	for i := 0; i < 400; i++ {
		x = w.Mulmat(ctx, x)
	}
	// The whole graph's time (after a warm-up), to cancel at an eighth of
	// it: a fixed delay fails on a machine fast enough to finish first.
	ctx.Forward(x).Compute(x)
	start := time.Now()
	ctx.Compute(x)
	full := time.Since(start)
	go func() {
		time.Sleep(full / 8)
		b.(*Backend).Cancel()
	}()
	start = time.Now()
	r := mustPanic(t, func() { ctx.Compute(x) }, "cancelled")
	if e, ok := r.(*Error); !ok || e.Status != StatusAborted {
		t.Fatalf("panic %#v, want *Error with StatusAborted", r)
	}
	if d := time.Since(start); d > full/2 {
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
