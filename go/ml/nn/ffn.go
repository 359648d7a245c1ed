package nn

import "github.com/ggml-rs/ggml-rs/go/ml"

// FFN is the dense feed-forward network (llama.cpp's build_ffn): gated,
// Down·(act(Gate·x) ⊙ Up·x) (LLM_FFN_PAR) with act SiLU (SwiGLU,
// LLM_FFN_SILU) or, with GELU, the tanh-approximated GELU (GeGLU,
// LLM_FFN_GELU: Gemma), each ggml's fused split GLU; or, with ReLUSquared
// and no Gate, Down·relu(Up·x + UpBias)² + DownBias (LLM_FFN_RELU_SQR:
// Nemotron-H; the biases optional).
type FFN struct {
	Gate, Up, Down   ml.Tensor
	UpBias, DownBias ml.Tensor
	GELU             bool
	ReLUSquared      bool
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
	g, u := f.Gate.Mulmat(ctx, x), f.Up.Mulmat(ctx, x)
	var h ml.Tensor
	if f.GELU {
		h = g.GELU(ctx, u)
	} else {
		h = g.SILU(ctx, u)
	}
	return f.Down.Mulmat(ctx, h)
}
