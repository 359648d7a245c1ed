package backend

// The cases of Ollama's ml/backend/ggml/ggml_test.go, on a backend without
// a model. Expected tensors are built with FromFloats from a Go reference
// (anchored by a few literal values from Ollama's tables) and compared like
// Ollama's EquateTensors: same shape, dtype and bytes, computed on the
// same, growing graph.

import (
	"fmt"
	"slices"
	"testing"

	"github.com/ggml-rs/ggml-rs/go/ml"
)

// TestInferShape runs Ollama's inferShape cases through Reshape of a
// [2,3,4] tensor.
func TestInferShape(t *testing.T) {
	cases := []struct {
		name  string
		input []int
		want  []int
		err   string
	}{
		{name: "no inferred shape", input: []int{2, 3, 4}, want: []int{2, 3, 4}},
		{name: "infer begin", input: []int{-1, 3, 4}, want: []int{2, 3, 4}},
		{name: "infer mid", input: []int{2, -1, 4}, want: []int{2, 3, 4}},
		{name: "infer end", input: []int{2, 3, -1}, want: []int{2, 3, 4}},
		{name: "too many inferred dims", input: []int{-1, 3, -1}, err: "only one dimension can be inferred"},
		{name: "infer gather", input: []int{2, -1}, want: []int{2, 12}},
		{name: "infer gather all", input: []int{-1}, want: []int{24}},
		{name: "infer split", input: []int{2, -1, 3, 2}, want: []int{2, 2, 3, 2}},
		{name: "indivisible infer", input: []int{2, -1, 2, 4}, err: "cannot infer dimension"},
		{name: "infer zero dim", input: []int{2, 0, 4}, err: "dimension cannot be zero"},
	}

	ctx := setup(t)
	tensor := ctx.Empty(ml.DTypeF32, 2, 3, 4)
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			if tt.err != "" {
				mustPanic(t, func() { tensor.Reshape(ctx, tt.input...) }, tt.err)
				return
			}
			got := tensor.Reshape(ctx, tt.input...)
			if !slices.Equal(got.Shape(), tt.want) {
				t.Errorf("shape = %v, want %v", got.Shape(), tt.want)
			}
		})
	}

	// After the panics the context still computes.
	x := ctx.Arange(0, 24, 1, ml.DTypeF32).Reshape(ctx, 2, -1, 4)
	if got := compute(ctx, x)[0]; len(got) != 24 || got[23] != 23 {
		t.Errorf("compute after failed reshapes: %v", got)
	}
}

func TestMulmat(t *testing.T) {
	cases := []struct {
		name   string
		a, b   []int
		want   []int
		anchor []float32 // Ollama's first expected values
	}{
		{"vector x vector", []int{3}, []int{3}, []int{1}, []float32{5}},
		{"vector x matrix", []int{4}, []int{4, 3}, []int{1, 3}, []float32{14, 38, 62}},
		{"broadcast vector x batched matrix", []int{4}, []int{4, 3, 10}, []int{1, 3, 10}, []float32{14, 38, 62, 86, 110, 134}},
		{"batched matrix x batched matrix", []int{4, 5, 10}, []int{4, 3, 10}, []int{5, 3, 10}, []float32{14, 38, 62, 86, 110, 38, 126}},
		{"broadcast matrix x batched matrix", []int{4, 5}, []int{4, 3, 10}, []int{5, 3, 10}, []float32{14, 38, 62, 86, 110, 38, 126}},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			ctx := setup(t)
			aRef, bRef := arangeRef(tt.a...), arangeRef(tt.b...)
			a := ctx.Arange(0, float32(len(aRef.data)), 1, ml.DTypeF32)
			if len(tt.a) > 1 {
				a = a.Reshape(ctx, tt.a...)
			}
			b := ctx.Arange(0, float32(len(bRef.data)), 1, ml.DTypeF32)
			if len(tt.b) > 1 {
				b = b.Reshape(ctx, tt.b...)
			}
			wantRef := mulmatRef(aRef, bRef)
			if !slices.Equal(wantRef.data[:len(tt.anchor)], tt.anchor) {
				t.Fatalf("reference disagrees with Ollama's table: %v", wantRef.data[:len(tt.anchor)])
			}
			want := ctx.FromFloats(wantRef.data, tt.want...)
			equalTensors(t, ctx, want, a.Mulmat(ctx, b))
		})
	}
}

func TestPermute(t *testing.T) {
	cases := []struct {
		name  string
		shape []int
		order []int
		want  []float32 // Ollama's table
	}{
		{"transpose", []int{3, 2}, []int{1, 0, 2, 3}, []float32{0, 3, 1, 4, 2, 5}},
		{"transpose fill dims", []int{3, 2}, []int{1, 0}, []float32{0, 3, 1, 4, 2, 5}},
		{"permute 3d", []int{2, 3, 5}, []int{2, 0, 1, 3}, []float32{
			0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28,
			1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29,
		}},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			ctx := setup(t)
			in := arangeRef(tt.shape...)
			var order [4]int
			for i := range order {
				order[i] = i
			}
			copy(order[:], tt.order)
			wantRef := permuteRef(in, order)
			if !slices.Equal(wantRef.data, tt.want) {
				t.Fatalf("reference disagrees with Ollama's table: %v", wantRef.data)
			}
			x := ctx.Arange(0, float32(len(in.data)), 1, ml.DTypeF32).Reshape(ctx, tt.shape...)
			got := x.Permute(ctx, tt.order...).Contiguous(ctx)
			equalTensors(t, ctx, ctx.FromFloats(wantRef.data, wantRef.shape()...), got)
		})
	}
}

func TestSlice(t *testing.T) {
	// Ollama's cases: each dim, [1,3) step 1 and [0,4) step 2, on a
	// [4,4,4,4] arange.
	anchors := map[[2]int][]float32{
		{0, 1}: {1, 2, 5, 6, 9, 10},
		{1, 1}: {4, 5, 6, 7, 8, 9, 10, 11, 20},
		{2, 1}: {16, 17, 18},
		{3, 1}: {64, 65},
		{0, 2}: {0, 2, 4, 6, 8, 10},
		{1, 2}: {0, 1, 2, 3, 8, 9, 10, 11, 16},
		{2, 2}: {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 32},
		{3, 2}: {0, 1, 2, 3},
	}
	for _, step := range []int{1, 2} {
		for dim := 0; dim < 4; dim++ {
			low, high := 1, 3
			if step == 2 {
				low, high = 0, 4
			}
			t.Run(fmt.Sprintf("dim=%d,low=%d,high=%d,step=%d", dim, low, high, step), func(t *testing.T) {
				ctx := setup(t)
				in := arangeRef(4, 4, 4, 4)
				wantRef := sliceRef(in, dim, low, high, step)
				anchor := anchors[[2]int{dim, step}]
				if !slices.Equal(wantRef.data[:len(anchor)], anchor) {
					t.Fatalf("reference disagrees with Ollama's table: %v", wantRef.data[:len(anchor)])
				}
				x := ctx.Arange(0, 256, 1, ml.DTypeF32).Reshape(ctx, 4, 4, 4, 4)
				got := x.Slice(ctx, dim, low, high, step).Contiguous(ctx)
				equalTensors(t, ctx, ctx.FromFloats(wantRef.data, wantRef.ne[:]...), got)
			})
		}
	}
}

func TestSplitSections(t *testing.T) {
	cases := []struct {
		shape    []int
		dim      int
		sections []int
		want     [][]float32 // Ollama's table
		shapes   [][]int
	}{
		{[]int{3, 4}, 0, []int{1, 1, 1}, [][]float32{{0, 3, 6, 9}, {1, 4, 7, 10}, {2, 5, 8, 11}}, [][]int{{1, 4}, {1, 4}, {1, 4}}},
		{[]int{3, 4}, 1, []int{1, 3}, [][]float32{{0, 1, 2}, {3, 4, 5, 6, 7, 8, 9, 10, 11}}, [][]int{{3, 1}, {3, 3}}},
		{[]int{4, 3}, 0, []int{2, 2}, [][]float32{{0, 1, 4, 5, 8, 9}, {2, 3, 6, 7, 10, 11}}, [][]int{{2, 3}, {2, 3}}},
		{[]int{4, 3}, 1, []int{1, 2}, [][]float32{{0, 1, 2, 3}, {4, 5, 6, 7, 8, 9, 10, 11}}, [][]int{{4, 1}, {4, 2}}},
	}
	for _, tt := range cases {
		t.Run(fmt.Sprintf("sections=%v", tt.sections), func(t *testing.T) {
			ctx := setup(t)
			x := ctx.Arange(0, 12, 1, ml.DTypeF32).Reshape(ctx, tt.shape...)
			got := x.ChunkSections(ctx, tt.dim, tt.sections...)
			for i := range got {
				got[i] = got[i].Contiguous(ctx)
			}
			ctx.Forward(got...).Compute(got...)
			for i := range tt.want {
				equalTensors(t, ctx, ctx.FromFloats(tt.want[i], tt.shapes[i]...), got[i])
			}
		})
	}

	ctx := setup(t)
	x := ctx.Arange(0, 12, 1, ml.DTypeF32).Reshape(ctx, 3, 4)
	mustPanic(t, func() { x.ChunkSections(ctx, 1, 1, 2) }, "sections do not sum to tensor dimension")
}

func TestChunk(t *testing.T) {
	cases := []struct {
		dim, chunk int
		want       [][]float32 // Ollama's table
		shapes     [][]int
	}{
		{0, 1, [][]float32{{0, 3, 6, 9}, {1, 4, 7, 10}, {2, 5, 8, 11}}, [][]int{{1, 4}, {1, 4}, {1, 4}}},
		{1, 2, [][]float32{{0, 1, 2, 3, 4, 5}, {6, 7, 8, 9, 10, 11}}, [][]int{{3, 2}, {3, 2}}},
		{0, 2, [][]float32{{0, 1, 3, 4, 6, 7, 9, 10}, {2, 5, 8, 11}}, [][]int{{2, 4}, {1, 4}}},
	}
	for _, tt := range cases {
		t.Run(fmt.Sprintf("dim=%d,chunk=%d", tt.dim, tt.chunk), func(t *testing.T) {
			ctx := setup(t)
			x := ctx.Arange(0, 12, 1, ml.DTypeF32).Reshape(ctx, 3, 4)
			got := x.Chunk(ctx, tt.dim, tt.chunk)
			if len(got) != len(tt.want) {
				t.Fatalf("%d chunks, want %d", len(got), len(tt.want))
			}
			for i := range got {
				got[i] = got[i].Contiguous(ctx)
			}
			ctx.Forward(got...).Compute(got...)
			for i := range tt.want {
				equalTensors(t, ctx, ctx.FromFloats(tt.want[i], tt.shapes[i]...), got[i])
			}
		})
	}
}

// TestNoOutputRows builds what Ollama's models build for a batch that ends
// before the prompt does: the rows that produce logits (none) taken from
// the hidden state, normalized, reshaped and multiplied by the output
// matrix. ggml gives an empty result and skips it at compute; so must we,
// beside a non-empty output of the same graph.
func TestNoOutputRows(t *testing.T) {
	ctx := setup(t)
	x := ctx.Arange(0, 40, 1, ml.DTypeF32).Reshape(ctx, 8, 5)
	w := ctx.Arange(0, 24, 1, ml.DTypeF32).Reshape(ctx, 8, 3)
	outputs := ctx.Input().FromInts(nil, 0)
	h := x.Rows(ctx, outputs).RMSNorm(ctx, nil, 1e-6)
	logits := w.Mulmat(ctx, h)
	// Shape() counts dims as ggml_n_dims does (up to the last one above 1).
	if d0, d1 := logits.Dim(0), logits.Dim(1); d0 != 3 || d1 != 0 {
		t.Fatalf("logits dims %d, %d, want 3, 0", d0, d1)
	}
	if r := logits.Reshape(ctx, 3, 1, 0); r.Dim(0) != 3 || r.Dim(1) != 1 || r.Dim(2) != 0 {
		t.Fatalf("reshaped logits %d %d %d, want 3 1 0", r.Dim(0), r.Dim(1), r.Dim(2))
	}
	all := w.Mulmat(ctx, x)
	got := compute(ctx, logits, all)
	if len(got[0]) != 0 {
		t.Errorf("empty logits read back %d values", len(got[0]))
	}
	// Row j of x is 8j..8j+7, row i of w is 8i..8i+7.
	for j := range 5 {
		for i := range 3 {
			var want float32
			for k := range 8 {
				want += float32((8*j + k) * (8*i + k))
			}
			if v := got[1][j*3+i]; v != want {
				t.Fatalf("product [%d,%d] = %v, want %v", i, j, v, want)
			}
		}
	}
	// A 0 beside an inferred dim stays Ollama's panic.
	mustPanic(t, func() { logits.Reshape(ctx, 3, -1, 0) }, "dimension cannot be zero")
}
