package nn

import "github.com/ggml-rs/ggml-rs/go/ml"

// ShortConv is LFM2's gated short convolution (llama.cpp's
// build_shortconv_block): InProj [d, 3d] splits into b, c and x;
// y = c ⊙ conv(b ⊙ x), a depthwise causal convolution with kernel Conv
// [L, d] over the carried state (the last L-1 inputs of each sequence);
// then OutProj [d, d]. Batches must be equal (each sequence SeqTokens
// tokens).
type ShortConv struct {
	InProj, Conv, OutProj ml.Tensor
}

// Forward maps the normed hidden states x [d, n] to the block's output
// [d, n], carrying the convolution state of layer in the cache.
func (s *ShortConv) Forward(ctx ml.Context, x ml.Tensor, b *Batch, layer int) ml.Tensor {
	d, T, nS := x.Dim(0), b.SeqTokens, b.Seqs
	// The state is read first, into the graph at once, as llama.cpp's
	// build_rs does (where layers meet devices, ggml's scheduler then
	// places the ops around it as it does llama.cpp's).
	state := b.Cache.ConvState(ctx, layer)
	ctx.Forward(state)
	bcx := s.InProj.Mulmat(ctx, x.Reshape(ctx, d, T, nS)) // [3d, T, nS]
	chunk := func(i int) ml.Tensor {
		return bcx.View(ctx, i*d*bcx.Stride(0), d, bcx.Stride(1), T, bcx.Stride(2), nS)
	}
	bg, cg, xv := chunk(0), chunk(1), chunk(2)
	bx := bg.Mul(ctx, xv).Permute(ctx, 1, 0, 2, 3) // [T, d, nS]

	// The window [L-1+T, d, nS]; the state after token t is its L-1
	// columns from t. With m kept states (to rewind past rejected draft
	// tokens) the cache takes the states after each of the last m tokens.
	m := b.Cache.StatesKept()
	width := s.Conv.Dim(0) - 1
	w := state.Concat(ctx, bx, 0)
	var kept []ml.Tensor
	if m == 1 {
		// As llama.cpp, the new state is written as soon as the window is
		// built: the window is the old state's only reader.
		b.Cache.SetConvState(ctx, layer, w.Slice(ctx, 0, T, T+width, 1).Contiguous(ctx))
	} else {
		for j := 0; j < m; j++ {
			kept = append(kept, w.View(ctx, (T-j)*w.Stride(0), width, w.Stride(1), w.Dim(1), w.Stride(2), nS))
		}
	}
	y := cg.Mul(ctx, w.SSMConv(ctx, s.Conv)) // [d, T, nS]
	out := s.OutProj.Mulmat(ctx, y).Reshape(ctx, d, T*nS)
	if kept != nil {
		ctx.Forward(out)
		b.Cache.SetConvStates(ctx, layer, kept)
	}
	return out
}
