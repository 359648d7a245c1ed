package nn

import "github.com/ggml-rs/ggml-rs/go/ml"

// FFN is the dense feed-forward network (llama.cpp's build_ffn): gated,
// Down·(act(Gate·x) ⊙ Up·x) (LLM_FFN_PAR) with act SiLU (SwiGLU,
// LLM_FFN_SILU) or, with GELU, the tanh-approximated GELU (GeGLU,
// LLM_FFN_GELU: Gemma), each ggml's fused split GLU; or, with ReLUSquared
// and no Gate, Down·relu(Up·x + UpBias)² + DownBias (LLM_FFN_RELU_SQR:
// Nemotron-H; the biases optional).
//
// With SplitGLU the activation and the product are two ops, the up
// projection first (llama.cpp's Gemma 3n graph), and Sparsity, when not 0,
// first cuts each token's gate values below mean + Sparsity·std
// (relu(g - cutoff), std with n-1 as llama.cpp: Gemma 3n's activation
// sparsity, its "gaussian top-k").
type FFN struct {
	Gate, Up, Down   ml.Tensor
	UpBias, DownBias ml.Tensor
	GELU             bool
	ReLUSquared      bool
	SplitGLU         bool
	Sparsity         float32
}

// Forward maps x [d, n] to [d, n].
func (f *FFN) Forward(ctx ml.Context, x ml.Tensor) ml.Tensor {
	if f.ReLUSquared {
		u := f.Up.Mulmat(ctx, x)
		if f.UpBias != nil {
			u = u.Add(ctx, f.UpBias)
		}
		out := f.Down.Mulmat(ctx, u.RELU(ctx).Sqr(ctx))
		if f.DownBias != nil {
			out = out.Add(ctx, f.DownBias)
		}
		return out
	}
	if f.SplitGLU {
		u, g := f.Up.Mulmat(ctx, x), f.Gate.Mulmat(ctx, x)
		if f.Sparsity != 0 {
			g = gaussianTopK(ctx, g, f.Sparsity)
		}
		if f.GELU {
			g = g.GELU(ctx)
		} else {
			g = g.SILU(ctx)
		}
		return f.Down.Mulmat(ctx, u.Mul(ctx, g))
	}
	g, u := f.Gate.Mulmat(ctx, x), f.Up.Mulmat(ctx, x)
	var h ml.Tensor
	if f.GELU {
		h = g.GELU(ctx, u)
	} else {
		h = g.SILU(ctx, u)
	}
	return f.Down.Mulmat(ctx, h)
}

// gaussianTopK keeps the values of each row of x [k, n] above mean +
// mul·std, less that cutoff: relu(x - cutoff).
func gaussianTopK(ctx ml.Context, x ml.Tensor, mul float32) ml.Tensor {
	mean := x.Mean(ctx)
	v := x.Sub(ctx, mean).Sqr(ctx).SumRows(ctx).Scale(ctx, float64(1/float32(x.Dim(0)-1)))
	cutoff := mean.Add(ctx, v.Sqrt(ctx).Scale(ctx, float64(mul)))
	return x.Sub(ctx, cutoff).RELU(ctx)
}
