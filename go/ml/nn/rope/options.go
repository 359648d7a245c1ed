// Package rope provides options for RoPE
package rope

import "github.com/ggml-rs/ggml-rs/go/ml"

// Options contains optional parameters for RoPE function
type Options struct {
	Type    int
	Factors ml.Tensor

	// YaRN options
	YaRN struct {
		OriginalContextLength int
		ExtrapolationFactor,
		AttentionFactor,
		BetaFast,
		BetaSlow float32
	}

	// MRoPE options
	MRoPE struct {
		Sections []int
	}
}

// Mode bits of Options.Type (ggml's GGML_ROPE_TYPE_* values).
const (
	typeNeoX       = 2
	typeMRoPE      = 1 << 3
	typeVision     = 1 << 4
	typeInterleave = 1 << 5
)

// WithTypeNeoX sets RoPE type to NeoX
func WithTypeNeoX() func(*Options) {
	return func(o *Options) { o.Type = typeNeoX }
}

// WithFactors sets custom rope factors; a nil tensor is ignored.
func WithFactors(factors ml.Tensor) func(*Options) {
	return func(o *Options) {
		if factors != nil {
			o.Factors = factors
		}
	}
}

// WithOriginalContextLength sets a custom context length
func WithOriginalContextLength(n int) func(*Options) {
	return func(o *Options) { o.YaRN.OriginalContextLength = n }
}

// WithExtrapolationFactor sets YaRN's extrapolation mix factor.
func WithExtrapolationFactor(extrapolationFactor float32) func(*Options) {
	return func(o *Options) { o.YaRN.ExtrapolationFactor = extrapolationFactor }
}

// WithAttentionFactor sets YaRN's magnitude scaling factor.
func WithAttentionFactor(attentionFactor float32) func(*Options) {
	return func(o *Options) { o.YaRN.AttentionFactor = attentionFactor }
}

// WithBetaFast sets YaRN's fast correction boundary.
func WithBetaFast(betaFast float32) func(*Options) {
	return func(o *Options) { o.YaRN.BetaFast = betaFast }
}

// WithBetaSlow sets YaRN's slow correction boundary.
func WithBetaSlow(betaSlow float32) func(*Options) {
	return func(o *Options) { o.YaRN.BetaSlow = betaSlow }
}

// WithMRoPE selects multi-section RoPE with the given sections.
func WithMRoPE(sections []int) func(*Options) {
	return func(o *Options) {
		o.Type |= typeMRoPE
		o.MRoPE.Sections = sections
	}
}

// WithVision selects the vision variant of multi-section RoPE.
func WithVision(sections []int) func(*Options) {
	return func(o *Options) {
		o.Type |= typeMRoPE | typeVision
		o.MRoPE.Sections = sections
	}
}

// WithInterleaveMRoPE selects interleaved multi-section RoPE.
func WithInterleaveMRoPE(sections []int) func(*Options) {
	return func(o *Options) {
		o.Type |= typeMRoPE | typeInterleave
		o.MRoPE.Sections = sections
	}
}
