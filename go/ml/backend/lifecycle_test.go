package backend

// Backend, context and tensor plumbing: creation, data in and out,
// closing, bad input, logging, memory accounting, Dump, allocations.

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ggml-rs/ggml-rs/go/ml"
	"github.com/ggml-rs/ggml-rs/go/ml/nn/rope"
)

func TestNewBackend(t *testing.T) {
	var gerr *Error
	if _, err := ml.NewBackend("/models/x.gguf", ml.BackendParams{}); !errors.As(err, &gerr) || gerr.Status != StatusIO || !strings.Contains(err.Error(), "x.gguf") {
		t.Errorf("missing model file: err = %v", err)
	}
	if _, err := ml.NewBackend("", ml.BackendParams{FlashAttention: 5}); err == nil {
		t.Error("invalid flash attention accepted")
	}
	if _, err := ml.NewBackend("", ml.BackendParams{NumThreads: 100000}); err == nil || !strings.Contains(err.Error(), "thread") {
		t.Errorf("absurd thread count: err = %v", err)
	}

	b := newBackend(t, ml.BackendParams{AllocMemory: true, NumThreads: 3})
	gb := b.(*Backend)
	if gb.Threads() != 3 {
		t.Errorf("Threads = %d, want 3", gb.Threads())
	}
	if d := newBackend(t, ml.BackendParams{}).(*Backend); d.Threads() != DefaultThreads() || DefaultThreads() < 1 {
		t.Errorf("default threads %d, DefaultThreads %d", d.Threads(), DefaultThreads())
	}
	if Threads(7) != 7 {
		t.Error("Threads(7)")
	}
	if b.Get("token_embd.weight") != nil {
		t.Error("Get on a backend without a model returned a tensor")
	}
	cfg := b.Config()
	if cfg.Architecture() != "" || cfg.Uint("block_count", 7) != 7 || cfg.String("x") != "" || cfg.Len() != 0 || cfg.Value("x") != nil {
		t.Error("empty config")
	}
	for range cfg.Keys() {
		t.Error("empty config has keys")
	}
	if err := b.Load(context.Background(), nil); err != nil {
		t.Errorf("Load: %v", err)
	}
	if err := newBackend(t, ml.BackendParams{}).Load(context.Background(), nil); err == nil {
		t.Error("Load without AllocMemory succeeded")
	}
	mustPanic(t, func() { b.NewContextSize(gb.maxGraphNodes + 1) }, "exceeds maximum")
	if got := b.NewContextSize(64); got.MaxGraphNodes() != 64 {
		t.Errorf("MaxGraphNodes = %d", got.MaxGraphNodes())
	} else {
		got.Close()
	}
	ctx := b.NewContext()
	defer ctx.Close()
	if ctx.MaxGraphNodes() != gb.maxGraphNodes || ctx.Input().MaxGraphNodes() != gb.maxGraphNodes {
		t.Errorf("MaxGraphNodes = %d, backend %d", ctx.MaxGraphNodes(), gb.maxGraphNodes)
	}
}

func TestCacheConfig(t *testing.T) {
	cases := map[ml.FlashAttentionType]ml.CacheConfig{
		ml.FlashAttentionEnabled:  {CachePadding: 256, MaskDType: ml.DTypeF16},
		ml.FlashAttentionDisabled: {CachePadding: 256, PermutedV: true},
		// ggml's CPU backend supports flash attention, so auto enables it
		// on a CPU-only machine (with a GPU present it depends on the GPU).
		ml.FlashAttentionAuto: {CachePadding: 256, MaskDType: ml.DTypeF16},
	}
	resolved := map[ml.FlashAttentionType]ml.FlashAttentionType{
		ml.FlashAttentionEnabled:  ml.FlashAttentionEnabled,
		ml.FlashAttentionDisabled: ml.FlashAttentionDisabled,
		ml.FlashAttentionAuto:     ml.FlashAttentionEnabled,
	}
	onlyCPU := true
	for _, d := range Devices() {
		onlyCPU = onlyCPU && d.Type == DeviceCPU
	}
	for fa, want := range cases {
		if fa == ml.FlashAttentionAuto && !onlyCPU {
			continue
		}
		b := newBackend(t, ml.BackendParams{FlashAttention: fa})
		bc, ok := b.(ml.BackendCacheConfig)
		if !ok || bc.CacheConfig() != want {
			t.Errorf("%v: CacheConfig = %+v, want %+v", fa, bc.CacheConfig(), want)
		}
		if got := b.(*Backend).FlashAttention(); got != resolved[fa] {
			t.Errorf("%v: FlashAttention() = %v, want %v", fa, got, resolved[fa])
		}
	}
}

func TestDevices(t *testing.T) {
	devices := Devices()
	cpus, gpus := 0, 0
	for _, d := range devices {
		switch d.Type {
		case DeviceCPU:
			cpus++
			if d.Name == "" || d.ID != "" || d.TotalMemory == 0 {
				t.Errorf("CPU device %+v", d)
			}
		case DeviceGPU, DeviceIntegratedGPU:
			gpus++
			if d.Library == "" || d.ID == "" || d.Integrated != (d.Type == DeviceIntegratedGPU) {
				t.Errorf("GPU device %+v", d)
			}
		}
		if d.Type.String() == "" || d.ComputeMajor != -1 {
			t.Errorf("device %+v", d)
		}
	}
	if cpus < 1 {
		t.Fatalf("no CPU device in %+v", devices)
	}
	b := newBackend(t, ml.BackendParams{AllocMemory: true})
	listed := b.BackendDevices()
	if listed == nil || len(listed) != gpus {
		t.Errorf("BackendDevices lists %d devices, want the %d GPUs: %+v", len(listed), gpus, listed)
	}
	for _, d := range listed {
		if d.Name == "CPU" || d.Library == "CPU" {
			t.Errorf("BackendDevices lists the CPU: %+v", d)
		}
	}
	if DeviceType(9).String() != "DeviceType(9)" || DeviceAccelerator.String() != "ACCEL" {
		t.Error("DeviceType.String")
	}
}

func TestDataTensors(t *testing.T) {
	ctx := setup(t)

	x := ctx.FromFloats([]float32{1, 2, 3, 4, 5, 6}, 3, 2)
	if x.Bytes() != nil || x.Floats() != nil {
		t.Error("Bytes/Floats of a tensor not listed in a Compute should be nil")
	}
	if got := x.BackendGet(); !slices.Equal(got, []float32{1, 2, 3, 4, 5, 6}) {
		t.Errorf("BackendGet = %v", got)
	}
	if x.Dim(0) != 3 || x.Dim(1) != 2 || x.Dim(2) != 1 || x.Dim(3) != 1 {
		t.Errorf("dims %d %d %d %d", x.Dim(0), x.Dim(1), x.Dim(2), x.Dim(3))
	}
	if x.Stride(0) != 4 || x.Stride(1) != 12 || x.Stride(2) != 24 || x.Stride(3) != 24 {
		t.Errorf("strides %d %d %d %d", x.Stride(0), x.Stride(1), x.Stride(2), x.Stride(3))
	}

	// Shape drops trailing 1s; a scalar is [1].
	if s := ctx.FromFloats([]float32{1, 2, 3}, 3, 1, 1).Shape(); !slices.Equal(s, []int{3}) {
		t.Errorf("[3,1,1] Shape = %v", s)
	}
	if s := ctx.FromFloats([]float32{1}, 1).Shape(); !slices.Equal(s, []int{1}) {
		t.Errorf("scalar Shape = %v", s)
	}
	if s := ctx.Zeros(ml.DTypeF32, 1, 4).Shape(); !slices.Equal(s, []int{1, 4}) {
		t.Errorf("[1,4] Shape = %v", s)
	}
	// No shape, or a leading 0: a 1-D empty tensor. (Computed in a
	// context of their own: ggml-rs cannot yet compute a graph that mixes
	// them with real nodes.)
	ectx := ctx.Input()
	for _, e := range []ml.Tensor{ectx.Empty(ml.DTypeF32), ectx.Empty(ml.DTypeI32, 0, 5), ectx.FromFloats(nil, 0)} {
		if !slices.Equal(e.Shape(), []int{0}) || e.BackendGet() != nil {
			t.Errorf("empty tensor: shape %v", e.Shape())
		}
		ectx.Forward(e).Compute(e)
		if e.Bytes() != nil || e.Floats() != nil {
			t.Error("empty tensor has data")
		}
	}

	// DTypes.
	for _, dt := range []ml.DType{ml.DTypeF32, ml.DTypeF16, ml.DTypeQ80, ml.DTypeQ40, ml.DTypeI32, ml.DTypeMXFP4} {
		if got := ctx.Zeros(dt, 64, 2).DType(); got != dt {
			t.Errorf("Zeros(%v).DType() = %v", dt, got)
		}
	}
	z := ctx.Zeros(ml.DTypeF16, 5, 3)
	if got := z.BackendGet(); len(got) != 15 || slices.ContainsFunc(got, func(v float32) bool { return v != 0 }) {
		t.Errorf("Zeros = %v", got)
	}

	// Bytes after Compute; FromInts/FromBytes; overwrite with From*.
	ints := ctx.FromInts([]int32{-1, 7, 300}, 3)
	raw := ctx.FromBytes(ml.DTypeI32, []byte{1, 0, 0, 0, 2, 0, 0, 0}, 2)
	ctx.Forward(ints, raw).Compute(ints, raw)
	if b := ints.Bytes(); !slices.Equal(b, []byte{255, 255, 255, 255, 7, 0, 0, 0, 44, 1, 0, 0}) {
		t.Errorf("Bytes = %v", b)
	}
	if f := raw.Floats(); !slices.Equal(f, []float32{1, 2}) {
		t.Errorf("I32 Floats = %v", f)
	}
	x.FromFloats([]float32{6, 5, 4, 3, 2, 1})
	y := x.Scale(ctx, 2)
	if got := compute(ctx, y)[0]; !slices.Equal(got, []float32{12, 10, 8, 6, 4, 2}) {
		t.Errorf("after FromFloats: %v", got)
	}
	ints.FromInts([]int32{1, 2, 3})
	ints.FromInts(nil) // empty: no-op
	if got := ints.BackendGet(); !slices.Equal(got, []float32{1, 2, 3}) {
		t.Errorf("after FromInts: %v", got)
	}
	z.FromBytes(f16Bytes(make([]float32, 15)))

	// Arange.
	a := ctx.Arange(0, 2, 0.5, ml.DTypeF32)
	ai := ctx.Arange(3, 9, 2, ml.DTypeI32)
	if ai.DType() != ml.DTypeI32 || a.DType() != ml.DTypeF32 {
		t.Errorf("Arange dtypes %v %v", a.DType(), ai.DType())
	}
	vals := compute(ctx, a, ai)
	if !slices.Equal(vals[0], []float32{0, 0.5, 1, 1.5}) || !slices.Equal(vals[1], []float32{3, 5, 7}) {
		t.Errorf("Arange = %v", vals)
	}

	// Views of computed tensors read in logical order.
	m := ctx.FromFloats([]float32{0, 1, 2, 3, 4, 5}, 3, 2)
	tr := m.Permute(ctx, 1, 0)
	ctx.Forward(tr).Compute(tr)
	if got := tr.Floats(); !slices.Equal(got, []float32{0, 3, 1, 4, 2, 5}) {
		t.Errorf("permuted view Floats = %v", got)
	}
	if got := tr.Bytes(); len(got) != 24 {
		t.Errorf("permuted view Bytes: %d bytes", len(got))
	}

	// Layer contexts hold data too; a negative layer is the context itself.
	l := ctx.Layer(3)
	if got := l.FromFloats([]float32{1, 2}, 2).BackendGet(); !slices.Equal(got, []float32{1, 2}) {
		t.Errorf("Layer tensor = %v", got)
	}
	if ctx.Layer(-1) != ctx {
		t.Error("Layer(-1) should return the receiver")
	}
}

func TestBadInput(t *testing.T) {
	b := newBackend(t, ml.BackendParams{AllocMemory: true})
	root := b.NewContext()
	defer root.Close()
	ctx := root.Input()
	x := ctx.FromFloats([]float32{1, 2, 3, 4, 5, 6}, 3, 2)

	// After each bad call, the same context still computes correctly.
	check := func(name string) {
		t.Helper()
		y := x.Add(ctx, x).Scale(ctx, 0.5)
		if got := compute(ctx, y)[0]; !slices.Equal(got, []float32{1, 2, 3, 4, 5, 6}) {
			t.Fatalf("after %s: %v", name, got)
		}
	}

	bad := []struct {
		name string
		f    func()
		want []string
	}{
		{"root data tensor", func() { root.Empty(ml.DTypeF32, 2) }, []string{"set Input or Layer before creating tensors"}},
		{"too many dims", func() { ctx.Empty(ml.DTypeF32, 1, 2, 3, 4, 5) }, []string{"unsupported number of dimensions"}},
		{"negative dim", func() { ctx.Zeros(ml.DTypeF32, 3, -1) }, []string{"invalid shape"}},
		{"other dtype", func() { ctx.Empty(ml.DTypeOther, 3) }, []string{"unsupported dtype"}},
		{"floats shape", func() { ctx.FromFloats([]float32{1, 2, 3}, 4) }, []string{"invalid shape: [4]"}},
		// Ollama's shape check divides: 3/2 == 1 passes it, the size check catches it.
		{"floats size", func() { ctx.FromFloats([]float32{1, 2, 3}, 2) }, []string{"data size does not match tensor size"}},
		{"ints shape", func() { ctx.FromInts([]int32{1, 2, 3}, 2, 2) }, []string{"invalid shape: [2 2]"}},
		{"ints zero dim", func() { ctx.FromInts([]int32{1, 2, 3}, 0) }, []string{"invalid shape"}},
		{"bytes size", func() { ctx.FromBytes(ml.DTypeF32, make([]byte, 7), 2) }, []string{"data size does not match tensor size"}},
		{"q8_0 row", func() { ctx.Empty(ml.DTypeQ80, 20) }, []string{"ggml-rs"}},
		{"arange dtype", func() { ctx.Arange(0, 3, 1, ml.DTypeF16) }, []string{"unsupported dtype for arange"}},
		{"arange range", func() { ctx.Arange(3, 0, 1, ml.DTypeF32) }, []string{"arange"}},
		{"tensor size", func() { x.FromFloats([]float32{1, 2}) }, []string{"data size does not match tensor size"}},
		{"broadcast", func() { x.Add(ctx, ctx.FromFloats([]float32{1, 2}, 2)) }, []string{"add", "broadcast", "f32[2]", "f32[3,2]"}},
		{"mulmat", func() { x.Mulmat(ctx, ctx.FromFloats([]float32{1, 2}, 2)) }, []string{"mul_mat"}},
		{"rows dtype", func() { x.Rows(ctx, x) }, []string{"get_rows", "i32"}},
		{"set rows", func() { x.SetRows(ctx, x, ctx.FromInts([]int32{0}, 1)) }, []string{"set_rows"}},
		{"mxfp4 unary", func() { ctx.Zeros(ml.DTypeMXFP4, 32).Exp(ctx) }, []string{"exp"}},
		{"nil operand", func() { x.Add(ctx, nil) }, []string{"add", "NULL"}},
		{"mul_mat_id ids", func() { x.MulmatID(ctx, x, x) }, []string{"ggml-rs: mul_mat_id: ids must be i32"}},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			mustPanic(t, c.f, c.want...)
			check(c.name)
		})
	}

	// The library's panics are *Error values with a status.
	r := mustPanic(t, func() { x.Rows(ctx, x) })
	if e, ok := r.(*Error); !ok || e.Status != StatusDType {
		t.Errorf("panic value %#v, want *Error with StatusDType", r)
	}

	// Ops on the root (no placement) are fine; only data tensors need one.
	s := root.Arange(0, 4, 1, ml.DTypeF32).Sqr(root)
	if got := compute(root, s)[0]; !slices.Equal(got, []float32{0, 1, 4, 9}) {
		t.Errorf("root ops: %v", got)
	}

	// Every not-yet-implemented op says so.
	for name, f := range map[string]func(){} {
		mustPanic(t, f, "ggml-rs: "+name+" is not implemented yet")
	}
	check("not implemented ops")
}

func TestOutOfMemory(t *testing.T) {
	var logs strings.Builder
	var mu sync.Mutex
	withLogs(t, &logs, &mu)
	ctx := setup(t)
	// 2^48 bytes cannot be allocated: Ollama's ErrNoMem panic.
	r := mustPanic(t, func() { ctx.Empty(ml.DTypeF32, 1<<20, 1<<20, 1<<6) }, "insufficient memory")
	var noMem ml.ErrNoMem
	if err, ok := r.(error); !ok || !errors.As(err, &noMem) || noMem.CPU.Name == "" {
		t.Errorf("panic value %#v, want ml.ErrNoMem with the CPU named", r)
	}
	mu.Lock()
	if !strings.Contains(logs.String(), "allocation failed") {
		t.Errorf("no warning logged: %s", logs.String())
	}
	mu.Unlock()
	if got := compute(ctx, ctx.FromFloats([]float32{2}, 1).Sqr(ctx))[0]; !slices.Equal(got, []float32{4}) {
		t.Errorf("after OOM: %v", got)
	}

	// A context that is full refuses further tensors, with a clear message.
	b := newBackend(t, ml.BackendParams{AllocMemory: true})
	small := b.NewContextSize(16)
	defer small.Close()
	in := small.Input()
	y := in.FromFloats([]float32{1}, 1)
	mustPanic(t, func() {
		for i := 0; i < 32; i++ {
			y = y.Add(in, y)
		}
	}, "full")
}

func TestClose(t *testing.T) {
	b := newBackend(t, ml.BackendParams{AllocMemory: true})
	root := b.NewContext()
	in := root.Input()
	layer := root.Layer(1)
	x := in.FromFloats([]float32{1, 2}, 2)
	y := x.Scale(in, 3)
	in.Forward(y).Compute(y)

	// Closing a sibling closes the whole family.
	layer.Close()
	for name, f := range map[string]func(){
		"op on closed ctx":    func() { x.Add(in, x) },
		"op via other family": func() { x.Add(root, x) },
		"Bytes":               func() { y.Bytes() },
		"Floats":              func() { y.Floats() },
		"BackendGet":          func() { x.BackendGet() },
		"FromFloats":          func() { x.FromFloats([]float32{1, 2}) },
		"Shape of new tensor": func() { y.Scale(in, 1) },
		"Empty":               func() { in.Empty(ml.DTypeF32, 2) },
		"Input":               func() { root.Input() },
		"Layer":               func() { root.Layer(0) },
		"Forward":             func() { root.Forward(x) },
		"Compute":             func() { in.Compute() },
		"Reserve":             func() { root.Reserve() },
		"SetBatchSize":        func() { in.SetBatchSize(4) },
		"Arange":              func() { root.Arange(0, 1, 1, ml.DTypeF32) },
		"RoPE":                func() { x.(*Tensor).RoPE(in, x, 2, 1, 1, rope.WithTypeNeoX()) },
		"ScaledDotProduct":    func() { x.(*Tensor).ScaledDotProductAttention(in, x, x, nil, nil, nil, 1, true) },
		"Permute":             func() { x.Permute(in, 1, 0, 2, 3) },
		"Reshape":             func() { x.Reshape(in, 2) },
		"View":                func() { x.View(in, 0, 1) },
	} {
		t.Run(name, func(t *testing.T) { mustPanic(t, f, "ggml-rs", "closed") })
	}

	// Closing again, through any member, is a no-op.
	root.Close()
	in.Close()
	layer.Close()
	var nilCtx *Context
	nilCtx.Close()

	// A tensor of a closed context used in a live one is refused too.
	live := b.NewContext().Input()
	defer live.Close()
	mustPanic(t, func() { live.FromFloats([]float32{1, 2}, 2).Add(live, x) }, "closed")
	// And the live context is unaffected.
	z := live.FromFloats([]float32{1, 2}, 2)
	if got := compute(live, z.Add(live, z))[0]; !slices.Equal(got, []float32{2, 4}) {
		t.Errorf("live context: %v", got)
	}

	// Closing the backend: contexts made before keep working; new ones
	// cannot be made; closing twice is a no-op.
	b2, err := ml.NewBackend("", ml.BackendParams{AllocMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	keep := b2.NewContext().Input()
	defer keep.Close()
	b2.Close()
	b2.Close()
	mustPanic(t, func() { b2.NewContext() }, "ggml-rs", "backend is closed")
	k := keep.FromFloats([]float32{3}, 1)
	if got := compute(keep, k.Sqr(keep))[0]; !slices.Equal(got, []float32{9}) {
		t.Errorf("context after backend Close: %v", got)
	}
	var nilBackend *Backend
	nilBackend.Close()
}

func TestComputeWithNotify(t *testing.T) {
	ctx := setup(t)
	x := ctx.FromFloats([]float32{1, 2, 3}, 3)
	y := x.Mul(ctx, x)
	notified := make(chan struct{})
	ctx.Forward(y).ComputeWithNotify(func() { close(notified) }, y)
	select {
	case <-notified:
	case <-time.After(5 * time.Second):
		t.Fatal("callback not called")
	}
	if got := y.Floats(); !slices.Equal(got, []float32{1, 4, 9}) {
		t.Errorf("result %v", got)
	}
	// Computing again on the grown graph recomputes everything.
	z := y.Add(ctx, x)
	ctx.Forward(z).Compute(z)
	if got := z.Floats(); !slices.Equal(got, []float32{2, 6, 12}) {
		t.Errorf("recompute %v", got)
	}
	// A batch-size hint changes nothing about the results.
	ctx.SetBatchSize(3)
	ctx.Compute(z)
	if got := z.Floats(); !slices.Equal(got, []float32{2, 6, 12}) {
		t.Errorf("after SetBatchSize %v", got)
	}
}

func TestConcurrentContexts(t *testing.T) {
	// Contexts of one backend compute from many goroutines. Computes are
	// serialised; an output read after another context's compute reads
	// what its own compute made (copied out before the buffers were reused).
	b := newBackend(t, ml.BackendParams{AllocMemory: true})
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok, wrong := 0, 0
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			ctx := b.NewContext().Input()
			defer ctx.Close()
			for i := 0; i < 20; i++ {
				x := ctx.FromFloats([]float32{float32(g), float32(i)}, 2)
				y := x.Mul(ctx, x).Add(ctx, x)
				ctx.Forward(y).Compute(y)
				want := []float32{float32(g*g + g), float32(i*i + i)}
				got := y.Floats()
				mu.Lock()
				if slices.Equal(got, want) {
					ok++
				} else {
					wrong++
				}
				mu.Unlock()
			}
		}(g)
	}
	wg.Wait()
	if wrong > 0 || ok != 160 {
		t.Errorf("%d right, %d wrong", ok, wrong)
	}
	if n := len(b.(*Backend).outputs.saved); n != 0 {
		t.Errorf("%d saved outputs left after every context closed", n)
	}
}

func TestOutputsOutliveAnotherCompute(t *testing.T) {
	b := newBackend(t, ml.BackendParams{AllocMemory: true})
	a := b.NewContext().Input()
	defer a.Close()
	c := b.NewContext().Input()
	defer c.Close()

	x := a.FromFloats([]float32{1, 2, 3}, 3)
	y := x.Scale(a, 2)
	h := x.Cast(a, ml.DTypeF16)
	a.Forward(y, h).Compute(x, y, h)
	z := c.FromFloats([]float32{5}, 1).Neg(c)
	c.Forward(z).Compute(z)

	// y and h lived in the compute buffers, which c's graph now uses: they
	// were copied out first, being unread (Ollama's hybrid models' caches
	// compute between a batch's compute and the read of its logits).
	for range 2 {
		if got := y.Floats(); !slices.Equal(got, []float32{2, 4, 6}) {
			t.Errorf("y after another compute = %v", got)
		}
		if got := h.Floats(); !slices.Equal(got, []float32{1, 2, 3}) {
			t.Errorf("f16 h after another compute = %v", got)
		}
		if got := y.Bytes(); len(got) != 12 {
			t.Errorf("y's bytes after another compute: %d", len(got))
		}
	}
	// x has a buffer of its own; z is current.
	if got := x.Floats(); !slices.Equal(got, []float32{1, 2, 3}) {
		t.Errorf("data tensor after another compute: %v", got)
	}
	if got := z.Floats(); !slices.Equal(got, []float32{-5}) {
		t.Errorf("z = %v", got)
	}
	// Computing a again makes y current; read, it is not copied again, and
	// the next compute (a Reserve resets the buffers too) loses it.
	a.Compute(y)
	if got := y.Floats(); !slices.Equal(got, []float32{2, 4, 6}) {
		t.Errorf("y after recompute = %v", got)
	}
	c.Reserve()
	mustPanic(t, func() { y.Floats() }, "overwritten")
	mustPanic(t, func() { y.Bytes() }, "overwritten")
	// z was read before the Reserve too.
	mustPanic(t, func() { z.Floats() }, "overwritten")

	// Closing a context drops what was kept for it.
	a.Compute(y)
	c.Compute(z)
	if n := len(b.(*Backend).outputs.saved); n != 2 {
		t.Fatalf("%d outputs kept, want y's and h's (a's)", n)
	}
	a.Close()
	if n := len(b.(*Backend).outputs.saved); n != 0 {
		t.Errorf("%d outputs kept after their context closed", n)
	}
}

func TestCrossContextTensors(t *testing.T) {
	// A tensor of one live context can feed a graph computed in another
	// (Ollama's multimodal store does this).
	b := newBackend(t, ml.BackendParams{AllocMemory: true})
	a := b.NewContext().Input()
	defer a.Close()
	c := b.NewContext().Input()
	defer c.Close()
	x := a.FromFloats([]float32{1, 2}, 2)
	y := x.Add(c, c.FromFloats([]float32{10, 20}, 2))
	if got := compute(c, y)[0]; !slices.Equal(got, []float32{11, 22}) {
		t.Errorf("cross-context: %v", got)
	}
}

func TestReserveAndMemory(t *testing.T) {
	b := newBackend(t, ml.BackendParams{AllocMemory: true})
	mem := b.BackendMemory()
	if mem.CPU.Name == "" || len(mem.CPU.Weights) != 1 || mem.CPU.Graph != 0 || len(mem.GPUs) != len(b.BackendDevices()) {
		t.Errorf("initial memory %+v", mem)
	}
	ctx := b.NewContext().Input()
	defer ctx.Close()
	x := ctx.Empty(ml.DTypeF32, 256, 64)
	y := x.Mulmat(ctx, x).Softmax(ctx)
	ctx.Forward(y).Reserve()
	mem = b.BackendMemory()
	var graph uint64 = mem.CPU.Graph
	for _, g := range mem.GPUs {
		graph += g.Graph
	}
	// At least the 64x64 F32 product (the softmax may reuse its memory).
	if graph < 64*64*4 {
		t.Errorf("graph memory after Reserve = %d", graph)
	}
	// Reserve leaves the context ready to compute.
	x.FromFloats(make([]float32, 256*64))
	ctx.Compute(y)
	if got := y.Floats(); len(got) != 64*64 || math.Abs(float64(got[0])-1.0/64) > 1e-6 {
		t.Errorf("compute after Reserve: %d values, first %v", len(got), got[0])
	}

	// Fit mode: sizes are measured; computing is refused.
	fit := newBackend(t, ml.BackendParams{AllocMemory: false})
	fctx := fit.NewContext().Input()
	defer fctx.Close()
	w := fctx.FromFloats(make([]float32, 128*32), 128, 32)
	z := w.Mulmat(fctx, w)
	fctx.Forward(z).Reserve()
	if fit.BackendMemory().CPU.Graph == 0 {
		t.Error("no graph memory measured without allocation")
	}
	mustPanic(t, func() { fctx.Compute(z) }, "compute")
}

// withLogs sends slog's default logger to w (debug level) for the test.
func withLogs(t *testing.T, w *strings.Builder, mu *sync.Mutex) {
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(lockedWriter{w, mu}, &slog.HandlerOptions{Level: slog.LevelDebug})))
	t.Cleanup(func() { slog.SetDefault(old) })
}

type lockedWriter struct {
	w  *strings.Builder
	mu *sync.Mutex
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func TestLogging(t *testing.T) {
	var logs strings.Builder
	var mu sync.Mutex
	withLogs(t, &logs, &mu)

	// An allocation ggml cannot make: ggml logs an error, which goes
	// through ggml-rs's log bridge to slog.
	ctx := setup(t)
	mustPanic(t, func() { ctx.Empty(ml.DTypeF32, 1<<20, 1<<20, 1<<6) }, "insufficient memory")

	mu.Lock()
	out := logs.String()
	mu.Unlock()
	var record string
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "source=ggml") && strings.Contains(line, "failed to allocate") {
			record = line
		}
	}
	if !strings.Contains(record, "level=ERROR") {
		t.Errorf("no ggml error record reached slog:\n%s", out)
	}

	for level, want := range map[int32]slog.Level{1: slog.LevelDebug, 2: slog.LevelInfo, 3: slog.LevelWarn, 4: slog.LevelError, 0: LevelTrace} {
		if got := slogLevel(level); got != want {
			t.Errorf("slogLevel(%d) = %v, want %v", level, got, want)
		}
	}
}

func TestDump(t *testing.T) {
	ctx := setup(t)
	f := ctx.FromFloats([]float32{1, -2.5, 3, 4, 5, 6}, 3, 2)
	if got, want := ml.Dump(ctx, f, ml.DumpWithPrecision(1)), "[[ 1.0, -2.5,  3.0],\n [ 4.0,  5.0,  6.0]]"; got != want {
		t.Errorf("Dump f32 =\n%s\nwant\n%s", got, want)
	}
	i := ctx.FromInts([]int32{1, 2, 3, 4, 5, 6, 7, 8}, 8)
	if got, want := ml.Dump(ctx, i, ml.DumpWithThreshold(4), ml.DumpWithEdgeItems(2)), "[ 1,  2, ...,  7,  8]"; got != want {
		t.Errorf("Dump i32 = %q, want %q", got, want)
	}
	h := ctx.FromBytes(ml.DTypeF16, f16Bytes([]float32{0.5, 1.5}), 2)
	if got, want := ml.Dump(ctx, h), "[ 0.5000,  1.5000]"; got != want {
		t.Errorf("Dump f16 = %q, want %q", got, want)
	}
	big := ctx.Arange(0, 3*4*5, 1, ml.DTypeF32).Reshape(ctx, 5, 4, 3)
	got := ml.Dump(ctx, big, ml.DumpWithThreshold(10), ml.DumpWithEdgeItems(1), ml.DumpWithPrecision(0))
	want := "[[[ 0, ...,  4],\n  ..., \n  [ 15, ...,  19]],\n\n ..., \n\n [[ 40, ...,  44],\n  ..., \n  [ 55, ...,  59]]]"
	if got != want {
		t.Errorf("Dump elided =\n%q\nwant\n%q", got, want)
	}
}

// TestAllocations checks the hot path: building an op costs one Go
// allocation (the returned *Tensor), and reading a shape again costs none.
// The methods are called on the concrete type: through the ml.Tensor
// interface the compiler cannot see that variadic arguments do not
// escape, so the caller allocates them (as with Ollama's engine).
func TestAllocations(t *testing.T) {
	b := newBackend(t, ml.BackendParams{AllocMemory: true})
	ctx := b.NewContext().Input()
	defer ctx.Close()
	x := ctx.Zeros(ml.DTypeF32, 8, 4, 2).(*Tensor)
	vp := ctx.Zeros(ml.DTypeF32, 2, 8, 4) // V as a PermutedV cache holds it
	w := ctx.Zeros(ml.DTypeF32, 8, 8).(*Tensor)
	pos := ctx.Zeros(ml.DTypeI32, 2)
	neox := rope.WithTypeNeoX()
	ops := map[string]func(){
		"Add":       func() { x.Add(ctx, x) },
		"SILU":      func() { x.SILU(ctx, x) },
		"RMSNorm":   func() { x.RMSNorm(ctx, nil, 1e-6) },
		"Mulmat":    func() { w.Mulmat(ctx, x) },
		"Reshape":   func() { x.Reshape(ctx, 8, -1) },
		"View":      func() { x.View(ctx, 0, 8, 32, 4) },
		"Permute":   func() { x.Permute(ctx, 0, 2, 1, 3) },
		"RoPE":      func() { x.RoPE(ctx, pos, 8, 10000, 1) },
		"RoPE neox": func() { x.RoPE(ctx, pos, 8, 10000, 1, neox) },
		"SDPA":      func() { x.ScaledDotProductAttention(ctx, x, vp, nil, nil, nil, 1, true) },
		"Dim":       func() { _ = x.Dim(1) },
	}
	for name, f := range ops {
		want := 1.0
		if name == "Dim" {
			want = 0
		}
		if got := testing.AllocsPerRun(100, f); got != want {
			t.Errorf("%s: %v allocations per call, want %v", name, got, want)
		}
	}
}

func TestDTypeAndLogValue(t *testing.T) {
	// Types ml has no name for report DTypeOther (bf16 here).
	other := &Tensor{}
	other.meta.Store(&_Ctype_struct_ggml_rs_tensor_meta{type_: typeBF16, n_dims: 1, ne: [4]_Ctype_int64_t{4, 1, 1, 1}})
	if other.DType() != ml.DTypeOther {
		t.Errorf("bf16 DType = %v", other.DType())
	}
	if got := other.LogValue().String(); got != "[type=bf16 shape=[4]]" {
		t.Errorf("LogValue = %q", got)
	}

	ctx := setup(t)
	x := ctx.Zeros(ml.DTypeQ40, 64, 3)
	if got := x.(*Tensor).LogValue().String(); got != "[type=q4_0 shape=[64 3]]" {
		t.Errorf("LogValue = %q", got)
	}
	if x.DType() != ml.DTypeQ40 || x.Stride(1) != 2*18 {
		t.Errorf("q4_0: %v stride %d", x.DType(), x.Stride(1))
	}
	ctx.Close()
	if got := x.(*Tensor).LogValue().String(); !strings.Contains(got, "closed") {
		t.Errorf("LogValue after Close = %q", got)
	}
}
