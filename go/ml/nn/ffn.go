package nn

import "github.com/ggml-rs/ggml-rs/go/ml"

// FFN is the dense gated feed-forward network (llama.cpp's build_ffn with
// LLM_FFN_PAR): Down·(act(Gate·x) ⊙ Up·x), act SiLU (SwiGLU,
// LLM_FFN_SILU) or, with GELU, the tanh-approximated GELU (GeGLU,
// LLM_FFN_GELU: Gemma), each ggml's fused split GLU.
type FFN struct {
	Gate, Up, Down ml.Tensor
	GELU           bool
}

// Forward maps x [d, n] to [d, n].
func (f *FFN) Forward(ctx ml.Context, x ml.Tensor) ml.Tensor {
	g, u := f.Gate.Mulmat(ctx, x), f.Up.Mulmat(ctx, x)
	var h ml.Tensor
	if f.GELU {
		h = g.GELU(ctx, u)
	} else {
		h = g.SILU(ctx, u)
	}
	return f.Down.Mulmat(ctx, h)
}
