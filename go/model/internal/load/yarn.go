package load

import (
	"math"

	"github.com/ggml-rs/ggml-rs/go/ml/nn/rope"
)

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
	// llama.cpp's keys, then Ollama's mistral3 converter's.
	y.BetaFast = r.Float("rope.scaling.yarn_beta_fast", r.Float("rope.scaling.beta_fast", 32))
	y.BetaSlow = r.Float("rope.scaling.yarn_beta_slow", r.Float("rope.scaling.beta_slow", 1))
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

// WithLogMul is y for a model whose YaRN magnitude has its own
// mscale_all_dim (llama.cpp's rope.scaling.yarn_log_multiplier, read for
// Mistral 3 and DeepSeek 2): the attention factor becomes llama.cpp's
// get_mscale(f, 1)/get_mscale(f, logMul)·1/(1 + 0.1·ln f)·attn_factor for
// the scaling factor f, in float32 as it computes it (with logMul 0, or
// f <= 1, it stays attn_factor).
func (y Yarn) WithLogMul(factor, logMul float32) Yarn {
	if !y.On || logMul == 0 || factor <= 1 {
		return y
	}
	ln := float32(math.Log(float64(factor)))
	mscale := func(m float32) float32 { return float32(0.1*m*ln) + 1 }
	a := mscale(1) / mscale(logMul)
	a *= 1 / (1 + 0.1*ln)
	y.AttnFactor = a * y.AttnFactor
	return y
}
