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
	go func() {
		time.Sleep(30 * time.Millisecond)
		b.(*Backend).Cancel()
	}()
	start := time.Now()
	r := mustPanic(t, func() { ctx.Forward(x).Compute(x) }, "cancelled")
	if e, ok := r.(*Error); !ok || e.Status != StatusAborted {
		t.Fatalf("panic %#v, want *Error with StatusAborted", r)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("cancel took %v", d)
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
