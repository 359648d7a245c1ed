package backend

// MulmatID and AddID against Go references on random experts, inputs and
// routing. Tolerances: F32 within 1e-4 absolute and relative (float64
// reference, K <= 64); F16 experts within 1e-3 (ggml rounds the activations
// to F16 too, as the reference does); Q8_0 experts within 0.1 absolute +
// 2% (ggml quantizes the activations to Q8_0: ~1% of the row norm, as in
// TestMulmatRandom); AddID exactly.

import (
	"fmt"
	"math/rand"
	"slices"
	"testing"

	"github.com/ggml-rs/ggml-rs/go/ml"
)

// routeIDs picks, for each of n tokens, u distinct experts of e.
func routeIDs(rng *rand.Rand, e, u, n int) []int32 {
	ids := make([]int32, 0, u*n)
	for range n {
		for _, x := range rng.Perm(e)[:u] {
			ids = append(ids, int32(x))
		}
	}
	return ids
}

// mulmatIDRef: as=[K,M,E], b=[K,nB,T], ids [U,T] → [M,U,T] with
// out[:, j, t] = as[:, :, ids[j,t]] · b[:, j%nB, t].
func mulmatIDRef(as, b ref, ids []int32, u int) ref {
	K, M, nB, T := as.ne[0], as.ne[1], b.ne[1], b.ne[2]
	out := newRef(M, u, T)
	out.each(func(m, j, tok, _ int) {
		ex := int(ids[tok*u+j])
		var s float64
		for k := 0; k < K; k++ {
			s += float64(as.at(k, m, ex, 0)) * float64(b.at(k, j%nB, tok, 0))
		}
		out.set(float32(s), m, j, tok, 0)
	})
	return out
}

// addIDRef: a=[n,U,T] plus row ids[j,t] of b=[n,rows].
func addIDRef(a, b ref, ids []int32) ref {
	out := newRef(a.ne[:]...)
	a.each(func(i, j, tok, _ int) {
		out.set(a.at(i, j, tok, 0)+b.at(i, int(ids[tok*a.ne[1]+j]), 0, 0), i, j, tok, 0)
	})
	return out
}

func TestMoEMulmatID(t *testing.T) {
	rng := rand.New(rand.NewSource(21))
	ctx := setup(t)
	cases := []struct{ k, m, e, u, nB, tok int }{
		{32, 8, 4, 2, 1, 5},  // one activation vector per token
		{64, 5, 6, 3, 3, 4},  // one per routed expert
		{32, 16, 8, 4, 2, 9}, // broadcast over pairs
		{64, 3, 3, 3, 1, 1},
	}
	for _, c := range cases {
		as, b := randRef(rng, c.k, c.m, c.e), randRef(rng, c.k, c.nB, c.tok)
		ids := routeIDs(rng, c.e, c.u, c.tok)
		idsT := ctx.Input().FromInts(ids, c.u, c.tok)
		want := mulmatIDRef(as, b, ids, c.u)
		t.Run(fmt.Sprintf("f32/%+v", c), func(t *testing.T) {
			got := as.tensor(ctx).MulmatID(ctx, b.tensor(ctx), idsT)
			if got.DType() != ml.DTypeF32 || !slices.Equal(got.Shape(), want.shape()) {
				t.Fatalf("got %v %v, want f32 %v", got.DType(), got.Shape(), want.shape())
			}
			closeTo(t, "MulmatID", want.data, compute(ctx, got)[0], 1e-4, 1e-4)
		})
		t.Run(fmt.Sprintf("f16/%+v", c), func(t *testing.T) {
			a16, ar := f16Tensor(ctx, as)
			want := mulmatIDRef(ar, mapRef(b, f16Round), ids, c.u)
			closeTo(t, "MulmatID f16", want.data, compute(ctx, a16.MulmatID(ctx, b.tensor(ctx), idsT))[0], 1e-3, 1e-3)
		})
		t.Run(fmt.Sprintf("q8_0/%+v", c), func(t *testing.T) {
			qa, deq := quantizeQ80(as.data)
			w := ctx.Input().FromBytes(ml.DTypeQ80, qa, c.k, c.m, c.e)
			ar := newRef(as.ne[:]...)
			copy(ar.data, deq)
			want := mulmatIDRef(ar, b, ids, c.u)
			closeTo(t, "MulmatID q8_0", want.data, compute(ctx, w.MulmatID(ctx, b.tensor(ctx), idsT))[0], 0.1, 0.02)
		})
	}
}

func TestMoEAddID(t *testing.T) {
	rng := rand.New(rand.NewSource(22))
	ctx := setup(t)
	for _, c := range []struct{ n, u, tok, rows int }{{5, 2, 3, 4}, {64, 4, 7, 8}, {1, 1, 1, 1}} {
		a, b := randRef(rng, c.n, c.u, c.tok), randRef(rng, c.n, c.rows)
		ids := routeIDs(rng, c.rows, c.u, c.tok)
		got := a.tensor(ctx).AddID(ctx, b.tensor(ctx), ctx.Input().FromInts(ids, c.u, c.tok))
		want := addIDRef(a, b, ids)
		if !slices.Equal(got.Shape(), want.shape()) {
			t.Fatalf("shape %v, want %v", got.Shape(), want.shape())
		}
		closeTo(t, fmt.Sprintf("AddID %+v", c), want.data, compute(ctx, got)[0], 0, 0)
	}

	// Ollama's LinearBatch: MulmatID, then AddID with the same ids.
	w, bias, x := randRef(rng, 32, 6, 4), randRef(rng, 6, 4), randRef(rng, 32, 1, 3)
	ids := routeIDs(rng, 4, 2, 3)
	idsT := ctx.Input().FromInts(ids, 2, 3)
	got := w.tensor(ctx).MulmatID(ctx, x.tensor(ctx), idsT).AddID(ctx, bias.tensor(ctx), idsT)
	want := addIDRef(mulmatIDRef(w, x, ids, 2), bias, ids)
	closeTo(t, "LinearBatch", want.data, compute(ctx, got)[0], 1e-4, 1e-4)
}

func TestMoEBadExpertID(t *testing.T) {
	rng := rand.New(rand.NewSource(23))
	ctx := setup(t)
	as, b, bias := randRef(rng, 32, 4, 3), randRef(rng, 32, 1, 2), randRef(rng, 4, 3)
	for _, bad := range []int32{3, -1, 1 << 30} {
		ids := ctx.Input().FromInts([]int32{0, bad, 2, 1}, 2, 2)
		y := as.tensor(ctx).MulmatID(ctx, b.tensor(ctx), ids)
		// Out-of-range ids are data: the compute fails (no abort) naming the
		// op. Host ids are checked before the graph runs.
		r := mustPanic(t, func() { compute(ctx, y) }, "mul_mat_id", "out of range")
		if e, ok := r.(*Error); !ok || e.Status != StatusInvalidArgument {
			t.Fatalf("panic %#v, want *Error with StatusInvalidArgument", r)
		}
		// Fixed ids: the same graph computes.
		good := []int32{0, 1, 2, 1}
		ids.FromInts(good)
		closeTo(t, "after fixing ids", mulmatIDRef(as, b, good, 2).data, compute(ctx, y)[0], 1e-4, 1e-4)

		zids := ctx.Input().FromInts([]int32{bad, 0, 1, 2}, 2, 2)
		z := y.AddID(ctx, bias.tensor(ctx), zids)
		mustPanic(t, func() { compute(ctx, z) }, "add_id", "out of range")
		// The graph keeps z: fix its ids too before the next round.
		zids.FromInts([]int32{2, 0, 1, 2})
		closeTo(t, "AddID after fixing ids", addIDRef(mulmatIDRef(as, b, good, 2), bias, []int32{2, 0, 1, 2}).data, compute(ctx, z)[0], 1e-4, 1e-4)
	}
}

func TestMoEBadInputs(t *testing.T) {
	ctx := setup(t)
	in := ctx.Input()
	as := in.FromFloats(make([]float32, 32*4*3), 32, 4, 3)
	b := in.FromFloats(make([]float32, 32*5), 32, 1, 5)
	ids := in.FromInts(make([]int32, 10), 2, 5)
	x := in.FromFloats(make([]float32, 4*2*5), 4, 2, 5)
	bias := in.FromFloats(make([]float32, 4*3), 4, 3)
	bad := []struct {
		name string
		f    func()
		want []string
	}{
		{"MulmatID f32 ids", func() { as.MulmatID(ctx, b, b) }, []string{"mul_mat_id: ids must be i32"}},
		{"MulmatID K", func() { as.MulmatID(ctx, in.FromFloats(make([]float32, 16*5), 16, 1, 5), ids) }, []string{"mul_mat_id: dim 0 (K) differs"}},
		{"MulmatID tokens", func() { as.MulmatID(ctx, in.FromFloats(make([]float32, 32*4), 32, 1, 4), ids) }, []string{"mul_mat_id", "one column per token"}},
		{"MulmatID f16 b", func() { as.MulmatID(ctx, in.FromBytes(ml.DTypeF16, make([]byte, 2*32*5), 32, 1, 5), ids) }, []string{"mul_mat_id", "must be f32, got b f16[32,1,5]"}},
		{"MulmatID nil ids", func() { as.MulmatID(ctx, b, nil) }, []string{"mul_mat_id: ids is NULL"}},
		{"AddID f16", func() { in.FromBytes(ml.DTypeF16, make([]byte, 2*40), 4, 2, 5).AddID(ctx, bias, ids) }, []string{"add_id: a must be f32"}},
		{"AddID ids shape", func() { x.AddID(ctx, bias, in.FromInts(make([]int32, 10), 5, 2)) }, []string{"add_id: ids i32[5,2] must be [2, 5]"}},
		{"AddID dim 0", func() { x.AddID(ctx, in.FromFloats(make([]float32, 9), 3, 3), ids) }, []string{"add_id: dim 0 differs"}},
	}
	for _, c := range bad {
		mustPanic(t, c.f, c.want...)
	}
	// The context still computes.
	got := compute(ctx, x.AddID(ctx, bias, ids))[0]
	if len(got) != 40 || slices.ContainsFunc(got, func(v float32) bool { return v != 0 }) {
		t.Errorf("after bad inputs: %v", got)
	}
}
