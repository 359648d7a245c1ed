package rope

import (
	"slices"
	"testing"
)

func apply(opts ...func(*Options)) Options {
	var o Options
	for _, f := range opts {
		f(&o)
	}
	return o
}

func TestOptionTypes(t *testing.T) {
	cases := []struct {
		name string
		opt  func(*Options)
		want int
	}{
		{"neox", WithTypeNeoX(), 2},
		{"mrope", WithMRoPE([]int{1, 2}), 8},
		{"vision", WithVision([]int{1, 2}), 24},
		{"imrope", WithInterleaveMRoPE([]int{1, 2}), 40},
	}
	for _, c := range cases {
		if got := apply(c.opt).Type; got != c.want {
			t.Errorf("%s: Type = %d, want %d", c.name, got, c.want)
		}
	}
	if got := apply(WithMRoPE([]int{3, 4, 5})).MRoPE.Sections; !slices.Equal(got, []int{3, 4, 5}) {
		t.Errorf("sections = %v", got)
	}
	// WithTypeNeoX replaces the type; the section options add bits.
	if got := apply(WithMRoPE(nil), WithTypeNeoX()).Type; got != 2 {
		t.Errorf("mrope then neox: Type = %d, want 2", got)
	}
	if got := apply(WithTypeNeoX(), WithMRoPE(nil)).Type; got != 10 {
		t.Errorf("neox then mrope: Type = %d, want 10", got)
	}
}

func TestYaRNOptions(t *testing.T) {
	o := apply(WithOriginalContextLength(4096), WithExtrapolationFactor(1), WithAttentionFactor(0.5), WithBetaFast(16), WithBetaSlow(2))
	if o.YaRN.OriginalContextLength != 4096 || o.YaRN.ExtrapolationFactor != 1 || o.YaRN.AttentionFactor != 0.5 || o.YaRN.BetaFast != 16 || o.YaRN.BetaSlow != 2 {
		t.Errorf("YaRN = %+v", o.YaRN)
	}
	if o := apply(WithFactors(nil)); o.Factors != nil {
		t.Errorf("WithFactors(nil) set Factors to %v", o.Factors)
	}
}
