package load

import "github.com/ggml-rs/ggml-rs/go/ml/nn/rope"

// Yarn is YaRN RoPE scaling as llama.cpp reads it (rope.scaling.*).
type Yarn struct {
	On                             bool
	OrigCtx                        int
	BetaFast, BetaSlow, AttnFactor float32
}

// Yarn reads YaRN RoPE scaling: rope.scaling.type yarn (llama.cpp), or no
// type with an original context length given (Ollama's converters write
// none); ctx is the default original context length.
func (r *Reader) Yarn(ctx int) Yarn {
	typ := r.String("rope.scaling.type", "")
	y := Yarn{On: typ == "yarn" || (typ == "" && r.Has("rope.scaling.original_context_length"))}
	y.OrigCtx = r.Int("rope.scaling.original_context_length", ctx)
	y.BetaFast = r.Float("rope.scaling.yarn_beta_fast", 32)
	y.BetaSlow = r.Float("rope.scaling.yarn_beta_slow", 1)
	// llama.cpp's attention factor: get_mscale(factor)/(1 + 0.1·ln factor)
	// (= 1) times rope.scaling.attn_factor; ggml applies the YaRN
	// magnitude scale itself.
	y.AttnFactor = r.Float("rope.scaling.attn_factor", 1)
	return y
}

// Options are the RoPE options of y (none when it is off).
func (y Yarn) Options() []func(*rope.Options) {
	if !y.On {
		return nil
	}
	return []func(*rope.Options){
		rope.WithOriginalContextLength(y.OrigCtx),
		rope.WithExtrapolationFactor(1),
		rope.WithAttentionFactor(y.AttnFactor),
		rope.WithBetaFast(y.BetaFast),
		rope.WithBetaSlow(y.BetaSlow),
	}
}
