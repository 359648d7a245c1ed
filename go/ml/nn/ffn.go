package nn

import "github.com/ggml-rs/ggml-rs/go/ml"

// FFN is the dense SwiGLU feed-forward network (llama.cpp's build_ffn
// with LLM_FFN_SILU, LLM_FFN_PAR): Down·(silu(Gate·x) ⊙ Up·x).
type FFN struct {
	Gate, Up, Down ml.Tensor
}

// Forward maps x [d, n] to [d, n].
func (f *FFN) Forward(ctx ml.Context, x ml.Tensor) ml.Tensor {
	h := f.Gate.Mulmat(ctx, x).SILU(ctx, f.Up.Mulmat(ctx, x))
	return f.Down.Mulmat(ctx, h)
}
