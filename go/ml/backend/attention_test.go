package backend

// RoPE and ScaledDotProductAttention against naive Go references.

import (
	"fmt"
	"math"
	"math/rand"
	"slices"
	"testing"

	"github.com/ggml-rs/ggml-rs/go/ml"
	"github.com/ggml-rs/ggml-rs/go/ml/nn/rope"
)

type ropeRefParams struct {
	nDims      int
	neox       bool
	base       float64
	freqScale  float64
	attnFactor float64
	factors    []float32
	// mrope: sections (in rotary pairs) choose which of the 4 position
	// rows each pair uses; pos then has 4*seq entries.
	sections []int
}

// ropeRef rotates x=[headDim, heads, seq] at positions pos.
func ropeRef(x ref, pos []int32, p ropeRefParams) ref {
	out := newRef(x.ne[:]...)
	copy(out.data, x.data)
	seq := x.ne[2]
	half := p.nDims / 2
	for s := 0; s < seq; s++ {
		for h := 0; h < x.ne[1]; h++ {
			for i := 0; i < half; i++ {
				position := float64(pos[s])
				if p.sections != nil {
					total := p.sections[0] + p.sections[1] + p.sections[2] + p.sections[3]
					sector := i % total
					row := 0
					switch {
					case sector < p.sections[0]:
						row = 0
					case sector < p.sections[0]+p.sections[1]:
						row = 1
					case sector < p.sections[0]+p.sections[1]+p.sections[2]:
						row = 2
					default:
						row = 3
					}
					position = float64(pos[row*seq+s])
				}
				theta := position * math.Pow(p.base, -2*float64(i)/float64(p.nDims))
				if p.factors != nil {
					theta /= float64(p.factors[i])
				}
				theta *= p.freqScale
				c, sn := math.Cos(theta)*p.attnFactor, math.Sin(theta)*p.attnFactor
				j0, j1 := 2*i, 2*i+1
				if p.neox || p.sections != nil {
					j0, j1 = i, i+half
				}
				x0, x1 := float64(x.at(j0, h, s, 0)), float64(x.at(j1, h, s, 0))
				out.set(float32(x0*c-x1*sn), j0, h, s, 0)
				out.set(float32(x0*sn+x1*c), j1, h, s, 0)
			}
		}
	}
	return out
}

func TestRoPE(t *testing.T) {
	rng := rand.New(rand.NewSource(10))
	ctx := setup(t)
	const headDim, heads, seq = 16, 3, 5
	x := randRef(rng, headDim, heads, seq)
	pos := []int32{0, 1, 7, 100, 4096}
	posT := ctx.Input().FromInts(pos, seq)
	factors := []float32{1, 1, 2, 2, 4, 4, 8, 8}

	cases := []struct {
		name  string
		opts  []func(*rope.Options)
		dim   int
		base  float32
		scale float32
		p     ropeRefParams
	}{
		{name: "normal", dim: 16, base: 10000, scale: 1, p: ropeRefParams{nDims: 16, base: 10000, freqScale: 1, attnFactor: 1}},
		{name: "neox", opts: []func(*rope.Options){rope.WithTypeNeoX()}, dim: 16, base: 10000, scale: 1,
			p: ropeRefParams{nDims: 16, neox: true, base: 10000, freqScale: 1, attnFactor: 1}},
		{name: "normal partial", dim: 8, base: 500000, scale: 0.25, p: ropeRefParams{nDims: 8, base: 500000, freqScale: 0.25, attnFactor: 1}},
		{name: "neox partial attn factor", opts: []func(*rope.Options){rope.WithTypeNeoX(), rope.WithAttentionFactor(0.5)}, dim: 12, base: 10000, scale: 1,
			p: ropeRefParams{nDims: 12, neox: true, base: 10000, freqScale: 1, attnFactor: 0.5}},
		{name: "neox factors", opts: []func(*rope.Options){rope.WithTypeNeoX(), rope.WithFactors(ctx.Input().FromFloats(factors, 8))}, dim: 16, base: 10000, scale: 1,
			p: ropeRefParams{nDims: 16, neox: true, base: 10000, freqScale: 1, attnFactor: 1, factors: factors}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := x.tensor(ctx).(*Tensor).RoPE(ctx, posT, c.dim, c.base, c.scale, c.opts...)
			if !slices.Equal(got.Shape(), []int{headDim, heads, seq}) || got.DType() != ml.DTypeF32 {
				t.Fatalf("got %v %v", got.DType(), got.Shape())
			}
			closeTo(t, c.name, ropeRef(x, pos, c.p).data, compute(ctx, got)[0], 1e-4, 1e-4)
		})
	}

	t.Run("f16", func(t *testing.T) {
		x16, xr := f16Tensor(ctx, x)
		got := x16.(*Tensor).RoPE(ctx, posT, 16, 10000, 1, rope.WithTypeNeoX())
		if got.DType() != ml.DTypeF16 {
			t.Fatalf("dtype %v", got.DType())
		}
		want := ropeRef(xr, pos, ropeRefParams{nDims: 16, neox: true, base: 10000, freqScale: 1, attnFactor: 1})
		closeTo(t, "rope f16", want.data, compute(ctx, got)[0], 4e-3, 4e-3)
	})

	t.Run("mrope", func(t *testing.T) {
		sections := []int{3, 3, 2, 0}
		mpos := make([]int32, 4*seq)
		for i := range mpos {
			mpos[i] = int32(rng.Intn(50))
		}
		got := x.tensor(ctx).(*Tensor).RoPE(ctx, ctx.Input().FromInts(mpos, 4*seq), 16, 10000, 1, rope.WithMRoPE(sections))
		want := ropeRef(x, mpos, ropeRefParams{nDims: 16, base: 10000, freqScale: 1, attnFactor: 1, sections: sections})
		closeTo(t, "mrope", want.data, compute(ctx, got)[0], 1e-4, 1e-4)
	})

	t.Run("bad input", func(t *testing.T) {
		xt := x.tensor(ctx).(*Tensor)
		mustPanic(t, func() { xt.RoPE(ctx, posT, 7, 10000, 1) }, "rope")
		mustPanic(t, func() { xt.RoPE(ctx, ctx.Input().FromInts([]int32{1, 2}, 2), 16, 10000, 1) }, "rope")
		mustPanic(t, func() { xt.RoPE(ctx, posT, 16, 10000, 1, rope.WithMRoPE([]int{1, 1, 1, 1, 1})) }, "at most 4")
		// The context still works.
		got := xt.RoPE(ctx, posT, 16, 10000, 1)
		closeTo(t, "after errors", ropeRef(x, pos, ropeRefParams{nDims: 16, base: 10000, freqScale: 1, attnFactor: 1}).data, compute(ctx, got)[0], 1e-4, 1e-4)
	})
}

type sdpaCase struct {
	dk, dv, heads, kvHeads, seqQ, seqK int
	mask, sinks, vmla                  bool
}

// sdpaRef computes attention per query head: q=[dk,H,Sq], k=[dk,Hkv,Sk],
// v=[dv,Hkv,Sk], mask=[Sk,Sq] (nil: none), sinks=[H], vmla=[dv,dv'];
// result [dv',H,Sq].
func sdpaRef(q, k, v ref, mask *ref, sinks []float32, vmla *ref, scale float64) ref {
	dk, H, Sq := q.ne[0], q.ne[1], q.ne[2]
	Hkv, Sk, dv := k.ne[1], k.ne[2], v.ne[0]
	outDim := dv
	if vmla != nil {
		outDim = vmla.ne[1]
	}
	out := newRef(outDim, H, Sq)
	for h := 0; h < H; h++ {
		hk := h / (H / Hkv)
		for i := 0; i < Sq; i++ {
			scores := make([]float64, Sk)
			m := math.Inf(-1)
			for j := 0; j < Sk; j++ {
				var s float64
				for d := 0; d < dk; d++ {
					s += float64(q.at(d, h, i, 0)) * float64(k.at(d, hk, j, 0))
				}
				s *= scale
				if mask != nil {
					s += float64(mask.at(j, i, 0, 0))
				}
				scores[j] = s
				m = max(m, s)
			}
			if sinks != nil {
				m = max(m, float64(sinks[h]))
			}
			var sum float64
			for j := range scores {
				scores[j] = math.Exp(scores[j] - m)
				sum += scores[j]
			}
			if sinks != nil {
				sum += math.Exp(float64(sinks[h]) - m)
			}
			o := make([]float64, dv)
			for j := range scores {
				for d := 0; d < dv; d++ {
					o[d] += scores[j] / sum * float64(v.at(d, hk, j, 0))
				}
			}
			for e := 0; e < outDim; e++ {
				val := o[e]
				if vmla != nil {
					val = 0
					for d := 0; d < dv; d++ {
						val += float64(vmla.at(d, e, 0, 0)) * o[d]
					}
				}
				out.set(float32(val), e, h, i, 0)
			}
		}
	}
	return out
}

func TestScaledDotProductAttention(t *testing.T) {
	cases := []sdpaCase{
		{dk: 16, dv: 16, heads: 4, kvHeads: 4, seqQ: 3, seqK: 7},
		{dk: 32, dv: 32, heads: 4, kvHeads: 2, seqQ: 5, seqK: 9, mask: true},
		{dk: 16, dv: 8, heads: 2, kvHeads: 1, seqQ: 4, seqK: 4, mask: true, sinks: true},
		{dk: 16, dv: 16, heads: 2, kvHeads: 2, seqQ: 2, seqK: 6, mask: true, vmla: true},
	}
	for _, fa := range []ml.FlashAttentionType{ml.FlashAttentionDisabled, ml.FlashAttentionEnabled} {
		b := newBackend(t, ml.BackendParams{AllocMemory: true, FlashAttention: fa})
		ctx := b.NewContext()
		t.Cleanup(ctx.Close)
		cfg := b.(*Backend).CacheConfig()
		for ci, c := range cases {
			for _, applied := range []bool{false, true} {
				name := fmt.Sprintf("%v/case%d/cacheApplied=%v", fa, ci, applied)
				t.Run(name, func(t *testing.T) {
					rng := rand.New(rand.NewSource(int64(100 + ci)))
					q := randRef(rng, c.dk, c.heads, c.seqQ)
					k := randRef(rng, c.dk, c.kvHeads, c.seqK)
					v := randRef(rng, c.dv, c.kvHeads, c.seqK)
					scale := 1 / math.Sqrt(float64(c.dk))

					var maskRef *ref
					var mask ml.Tensor
					if c.mask {
						m := newRef(c.seqK, c.seqQ)
						// Causal over the last seqQ keys.
						m.each(func(j, i, _, _ int) {
							if j > c.seqK-c.seqQ+i {
								m.set(float32(math.Inf(-1)), j, i, 0, 0)
							}
						})
						maskRef = &m
						mask = m.tensor(ctx)
						if applied && cfg.MaskDType == ml.DTypeF16 {
							mask = mask.Cast(ctx, ml.DTypeF16)
						}
					}
					var sinks []float32
					var sinkT ml.Tensor
					if c.sinks {
						sinks = randRef(rng, c.heads).data
						sinkT = ctx.Input().FromFloats(sinks, c.heads)
					}
					var vmlaRef *ref
					var vmla ml.Tensor
					if c.vmla {
						w := randRef(rng, c.dv, 12)
						vmlaRef = &w
						vmla = w.tensor(ctx)
					}

					value := v.tensor(ctx)
					if applied && cfg.PermutedV {
						// What a PermutedV cache returns: [seqK, dv, kvHeads].
						value = permuteRef(v, [4]int{1, 2, 0, 3}).tensor(ctx)
					}
					got := q.tensor(ctx).(*Tensor).ScaledDotProductAttention(ctx, k.tensor(ctx), value, mask, sinkT, vmla, scale, applied)
					want := sdpaRef(q, k, v, maskRef, sinks, vmlaRef, scale)
					if !slices.Equal(got.Shape(), want.shape()) {
						t.Fatalf("shape %v, want %v", got.Shape(), want.shape())
					}
					tol := 1e-4
					if fa == ml.FlashAttentionEnabled {
						tol = 5e-3 // the CPU kernel rounds K·Q inputs to F16
					}
					closeTo(t, name, want.data, compute(ctx, got)[0], tol, tol)
				})
			}
		}

		t.Run(fmt.Sprintf("%v/f16 kv", fa), func(t *testing.T) {
			rng := rand.New(rand.NewSource(7))
			q, k, v := randRef(rng, 32, 4, 3), randRef(rng, 32, 2, 8), randRef(rng, 32, 2, 8)
			k16, kr := f16Tensor(ctx, k)
			var v16 ml.Tensor
			var vr ref
			if cfg.PermutedV {
				var vp ref
				v16, vp = f16Tensor(ctx, permuteRef(v, [4]int{1, 2, 0, 3}))
				vr = permuteRef(vp, [4]int{2, 0, 1, 3})
			} else {
				v16, vr = f16Tensor(ctx, v)
			}
			got := q.tensor(ctx).(*Tensor).ScaledDotProductAttention(ctx, k16, v16, nil, nil, nil, 0.2, true)
			closeTo(t, "f16 kv", sdpaRef(q, kr, vr, nil, nil, nil, 0.2).data, compute(ctx, got)[0], 5e-3, 5e-3)
		})

		t.Run(fmt.Sprintf("%v/bad input", fa), func(t *testing.T) {
			rng := rand.New(rand.NewSource(8))
			q, k, v := randRef(rng, 16, 2, 3), randRef(rng, 8, 2, 4), randRef(rng, 16, 2, 4)
			mustPanic(t, func() {
				q.tensor(ctx).(*Tensor).ScaledDotProductAttention(ctx, k.tensor(ctx), v.tensor(ctx), nil, nil, nil, 1, false)
			}, "sdpa")
			k3 := randRef(rng, 16, 3, 4)
			mustPanic(t, func() {
				q.tensor(ctx).(*Tensor).ScaledDotProductAttention(ctx, k3.tensor(ctx), v.tensor(ctx), nil, nil, nil, 1, false)
			}, "sdpa")
		})
	}
}
