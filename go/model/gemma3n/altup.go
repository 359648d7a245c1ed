package gemma3n

import (
	"math"

	"github.com/ggml-rs/ggml-rs/go/ml"
	"github.com/ggml-rs/ggml-rs/go/ml/nn"
	"github.com/ggml-rs/ggml-rs/go/model/decoder"
)

// stack runs Gemma 3n's layers over AltUp's hidden states (the model's
// decoder.Stack), as llama.cpp's gemma3n graph: the states of a batch are
// [d, n, altUp], slice i the i-th state of every token.
type stack struct {
	blocks *[]decoder.Block // the model's: norms, attention, feed-forward
	layers []layer          // what else each layer has

	hidden, perLayer, altUp, active int
	eps                             float32

	altUpProj, altUpUnembd ml.Tensor // [d, d, altUp-1]
	perLayerEmb            ml.Tensor // [perLayer·layers, vocab]
	perLayerIn             ml.Tensor // [d, perLayer·layers]
	perLayerNorm           ml.Tensor // [perLayer]
}

// layer is one layer's AltUp, Laurel and per-layer input weights.
type layer struct {
	routerNorm, router ml.Tensor // [d], [d, altUp]
	predict, correct   ml.Tensor // [altUp, altUp²], [altUp, altUp]
	correctScale       ml.Tensor // [d], nil when not applied
	laurelL, laurelR   ml.Tensor // [d, rank], [rank, d]
	laurelNorm         ml.Tensor // [d]
	gate, proj         ml.Tensor // [d, perLayer], [perLayer, d]
	postNorm           ml.Tensor // [d]
}

// f32 is x as llama.cpp's float constants are (float32 arithmetic).
func f32(x float32) float64 { return float64(x) }

var invSqrt2 = f32(1 / float32(math.Sqrt(2)))

// Forward implements decoder.Stack.
func (s *stack) Forward(ctx ml.Context, x, tokens ml.Tensor, b *nn.Batch) ml.Tensor {
	pin, _ := ctx.(ml.NormLayers)
	setLayer := func(i int) {
		if pin != nil {
			pin.SetNormLayer(i)
		}
	}
	d, n, a := s.hidden, b.Tokens, s.altUp
	perLayer := s.perLayerInputs(ctx, x, tokens, n)

	// The other states start as projections of the embeddings, scaled to
	// their magnitude.
	target := magnitude(ctx, x)
	added := s.altUpProj.Mulmat(ctx, x.Repeat4D(ctx, d, n, a-1, 1))
	added = added.Mul(ctx, target).Div(ctx, magnitude(ctx, added))
	h := x.Concat(ctx, added, 2)

	blocks := *s.blocks
	one := ctx.Input().FromFloats([]float32{1}, 1) // the correction coefficients' offset
	for i := range s.layers {
		setLayer(i)
		h = s.layer(ctx, i, &blocks[i], h, slice(ctx, perLayer, i), one, b, setLayer)
	}
	setLayer(-1)

	// The states merge back into one: the others projected back, scaled to
	// the active one's magnitude, and averaged with the first.
	target = magnitude(ctx, slice(ctx, h, s.active))
	un := s.altUpUnembd.Mulmat(ctx, rest(ctx, h))
	un = un.Mul(ctx, target).Div(ctx, magnitude(ctx, un))
	out := slice(ctx, h, 0)
	for i := 0; i < a-1; i++ {
		out = out.Add(ctx, slice(ctx, un, i))
	}
	return out.Scale(ctx, f32(1/float32(a)))
}

// perLayerInputs are every layer's inputs [perLayer, n, layers]: each
// token's per-layer embeddings (scaled by √perLayer) and the projection of
// its embeddings x (scaled by 1/√d, RMS-normed), averaged by 1/√2.
func (s *stack) perLayerInputs(ctx ml.Context, x, tokens ml.Tensor, n int) ml.Tensor {
	p, l := s.perLayer, len(s.layers)
	emb := s.perLayerEmb.Rows(ctx, tokens).Reshape(ctx, p, l, n)
	emb = emb.Scale(ctx, f32(float32(math.Sqrt(float64(p)))))
	proj := s.perLayerIn.Mulmat(ctx, x).Scale(ctx, f32(1/float32(math.Sqrt(float64(s.hidden)))))
	proj = proj.Reshape(ctx, p, l, n).RMSNorm(ctx, s.perLayerNorm, s.eps)
	in := proj.Add(ctx, emb).Scale(ctx, invSqrt2)
	return in.Permute(ctx, 0, 2, 1, 3).Contiguous(ctx)
}

// layer is layer i over the states h [d, n, altUp] with its per-layer
// input in [perLayer, n].
func (s *stack) layer(ctx ml.Context, i int, bl *decoder.Block, h, in, one ml.Tensor, b *nn.Batch, setLayer func(int)) ml.Tensor {
	l, eps := &s.layers[i], s.eps
	pred := s.predict(ctx, l, h)
	active := slice(ctx, pred, s.active)

	x := active.RMSNorm(ctx, bl.AttnNorm, eps)
	laurel := l.laurel(ctx, x, eps)
	att := bl.Mixer.Forward(ctx, x, b, i).RMSNorm(ctx, bl.AttnPostNorm, eps).Add(ctx, active)
	att = att.Add(ctx, laurel).Scale(ctx, invSqrt2)

	f := bl.FFN.Forward(ctx, att.RMSNorm(ctx, bl.FFNNorm, eps))
	setLayer(-1) // llama.cpp builds this norm outside the layer
	f = f.RMSNorm(ctx, bl.FFNPostNorm, eps)
	setLayer(i)
	f = f.Add(ctx, att)

	corrected := s.correct(ctx, l, pred, f, one)

	// The active state, corrected, gates the layer's per-layer input,
	// whose projection is added to the other states.
	g := slice(ctx, corrected, s.active)
	if l.correctScale != nil {
		g = g.Mul(ctx, l.correctScale)
	}
	g = l.gate.Mulmat(ctx, g).GELU(ctx).Mul(ctx, in)
	g = l.proj.Mulmat(ctx, g).RMSNorm(ctx, l.postNorm, eps)
	return slice(ctx, corrected, 0).Concat(ctx, rest(ctx, corrected).Add(ctx, g), 2)
}

// modalities are the router's weights [altUp, n] for the states x [d, n]:
// tanh(router · rmsnorm(x)/d).
func (s *stack) modalities(ctx ml.Context, l *layer, x ml.Tensor) ml.Tensor {
	in := x.RMSNorm(ctx, l.routerNorm, s.eps).Scale(ctx, f32(1/float32(s.hidden)))
	return l.router.Mulmat(ctx, in).Tanh(ctx)
}

// predict is every state predicted from all of them by coefficients the
// active one routes: h + Σ_j c_ij·h_j.
func (s *stack) predict(ctx ml.Context, l *layer, h ml.Tensor) ml.Tensor {
	a, n := s.altUp, h.Dim(1)
	coefs := l.predict.Mulmat(ctx, s.modalities(ctx, l, slice(ctx, h, s.active))).Reshape(ctx, a, a, n)
	pred := h.Permute(ctx, 1, 2, 0, 3).Contiguous(ctx).Mulmat(ctx, coefs) // [d, altUp, n]
	return pred.Permute(ctx, 0, 2, 1, 3).Contiguous(ctx).Add(ctx, h)
}

// correct adds to every predicted state the innovation (the layer's output
// act less the active prediction) times its coefficient plus one.
func (s *stack) correct(ctx ml.Context, l *layer, pred, act, one ml.Tensor) ml.Tensor {
	d, n, a := s.hidden, act.Dim(1), s.altUp
	mod := s.modalities(ctx, l, act)
	innovation := act.Sub(ctx, slice(ctx, pred, s.active))
	coefs := l.correct.Mulmat(ctx, mod).Add(ctx, one)
	coefs = coefs.Permute(ctx, 1, 0, 2, 3).Contiguous(ctx, 1, n, a)
	return innovation.Repeat4D(ctx, d, n, a, 1).Mul(ctx, coefs).Add(ctx, pred)
}

// laurel is x plus its low-rank residual, RMS-normed.
func (l *layer) laurel(ctx ml.Context, x ml.Tensor, eps float32) ml.Tensor {
	return l.laurelR.Mulmat(ctx, l.laurelL.Mulmat(ctx, x)).RMSNorm(ctx, l.laurelNorm, eps).Add(ctx, x)
}

// magnitude is each row's L2 norm [1, n, …] (llama.cpp's calc_magnitude).
func magnitude(ctx ml.Context, x ml.Tensor) ml.Tensor {
	return x.Sqr(ctx).SumRows(ctx).Sqrt(ctx)
}

// slice is state i of x [d, n, k]: a [d, n] view.
func slice(ctx ml.Context, x ml.Tensor, i int) ml.Tensor {
	return x.View(ctx, i*x.Stride(2), x.Dim(0), x.Stride(1), x.Dim(1))
}

// rest is the states 1, 2, … of x [d, n, k]: a [d, n, k-1] view.
func rest(ctx ml.Context, x ml.Tensor) ml.Tensor {
	return x.View(ctx, x.Stride(2), x.Dim(0), x.Stride(1), x.Dim(1), x.Stride(2), x.Dim(2)-1)
}
