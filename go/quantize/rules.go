package quantize

import (
	"fmt"
	"strings"

	"github.com/ggml-rs/ggml-rs/go/gguf"
)

// The rules of llama-quant.cpp that pick each tensor's type: which
// tensors may be quantized (tensor_allows_quantization), the category of
// a name (tensor_get_category), the mixes of the _S/_M/_L file types
// (llama_tensor_get_type_impl) and the fallback for row lengths the
// type's block does not divide (tensor_type_fallback).

type category int

const (
	catOther category = iota
	catTokenEmbd
	catAttnQ
	catAttnV
	catAttnK
	catAttnQKV
	catAttnKVB
	catAttnOutput
	catFFNUp
	catFFNGate
	catFFNDown
	catOutput
)

func isTokenEmbd(name string) bool {
	return name == "token_embd.weight" || name == "per_layer_token_embd.weight"
}

// categoryOf: the first match in llama.cpp's order (substrings).
func categoryOf(name string) category {
	switch {
	case name == "output.weight":
		return catOutput
	case isTokenEmbd(name):
		return catTokenEmbd
	}
	for _, c := range []struct {
		sub string
		cat category
	}{
		{"attn_qkv.weight", catAttnQKV}, {"attn_kv_b.weight", catAttnKVB}, {"attn_v.weight", catAttnV},
		{"attn_k.weight", catAttnK}, {"attn_q.weight", catAttnQ}, {"attn_output.weight", catAttnOutput},
		{"ffn_up", catFFNUp}, {"ffn_gate", catFFNGate}, {"ffn_down", catFFNDown},
	} {
		if strings.Contains(name, c.sub) {
			return c.cat
		}
	}
	return catOther
}

// isAttnV: the tensors treated as attn_v (more sensitive to quantization).
func (c category) isAttnV() bool { return c == catAttnV || c == catAttnQKV || c == catAttnKVB }

// nDims is ggml_n_dims: the dimensions without trailing 1s (at least 1).
func nDims(shape []uint64) int {
	n := len(shape)
	for n > 1 && shape[n-1] == 1 {
		n--
	}
	return n
}

// neverQuantized: substrings of the names llama.cpp keeps in their type
// whatever the file type.
var neverQuantized = []string{
	"_norm.weight", "ffn_gate_inp.weight", "ffn_gate_tid2eid.weight", "altup", "laurel", "per_layer_model_proj",
	"ssm_conv1d", "shortconv.conv.weight", "indexer.k_proj.weight", "indexer.q_proj.weight",
	"time_mix_first.weight", "time_mix_w0.weight", "time_mix_w1.weight", "time_mix_w2.weight",
	"time_mix_v0.weight", "time_mix_v1.weight", "time_mix_v2.weight", "time_mix_a0.weight",
	"time_mix_a1.weight", "time_mix_a2.weight", "time_mix_g1.weight", "time_mix_g2.weight",
	"time_mix_decay_w1.weight", "time_mix_decay_w2.weight", "time_mix_lerp_fused.weight",
	"attn_rel_b.weight", ".position_embd", "sam.pos_embd", "sam.neck.", "sam.net_", ".rel_pos",
	".patch_embd", ".patch_merger", "a.rvq.codebook", "mm.a.code_embd",
}

// glm5NextKept: more names kept for the glm5-next architecture.
var glm5NextKept = []string{
	"hc_", "indexer.attn_q_b", "indexer.attn_k", "indexer.proj", "indexer_compressor_gate",
	"indexer_compressor_ape", "ssm_f_a.weight", "ssm_f_b.weight", "ssm_g_a.weight", "ssm_g_b.weight",
	"ssm_beta.weight", "attn_kv_a_mqa.weight", "attn_k_b.weight", "attn_v_b.weight",
}

// allowsQuantization: tensor_allows_quantization (quantize_output_tensor
// and only_copy at their defaults).
func allowsQuantization(arch string, t gguf.TensorInfo) bool {
	if nDims(t.Shape) < 2 {
		return false
	}
	name := t.Name
	// "ends with weight" as llama.cpp tests it: rfind("weight") ==
	// size-6 in size_t arithmetic, which a 5-byte name also passes
	// (npos == 5-6).
	if i := strings.LastIndex(name, "weight"); !(i >= 0 && i == len(name)-6) && !(i < 0 && len(name) == 5) {
		return false
	}
	for _, s := range neverQuantized {
		if strings.Contains(name, s) {
			return false
		}
	}
	// positional embeddings and token types (BERT and the like)
	if name == "position_embd.weight" || name == "token_types.weight" {
		return false
	}
	if arch == "glm5-next" {
		for _, s := range glm5NextKept {
			if strings.Contains(name, s) {
				return false
			}
		}
	}
	return true
}

// fallback: tensor_type_fallback. A row length (ne[0]) the target's block
// does not divide gets a smaller-block type, F16 when that does not fit
// either.
func fallback(t gguf.TensorInfo, target gguf.TensorType) (gguf.TensorType, bool, error) {
	ncols := t.Shape[0]
	if ncols%blockSize(target) == 0 {
		return target, false, nil
	}
	ret := target
	switch target {
	case gguf.TensorIQ1S, gguf.TensorIQ1M, gguf.TensorIQ2XXS, gguf.TensorIQ2XS, gguf.TensorIQ2S,
		gguf.TensorIQ3XXS, gguf.TensorIQ3S, gguf.TensorIQ4XS:
		ret = gguf.TensorIQ4NL
	case gguf.TensorQ2_0, gguf.TensorQ2K, gguf.TensorQ3K, gguf.TensorTQ1_0, gguf.TensorTQ2_0:
		ret = gguf.TensorQ4_0
	case gguf.TensorQ4K:
		ret = gguf.TensorQ5_0
	case gguf.TensorQ5K:
		ret = gguf.TensorQ5_1
	case gguf.TensorQ6K:
		ret = gguf.TensorQ8_0
	default:
		if blockSize(target) > 32 {
			return 0, false, fmt.Errorf("no tensor type fallback is defined for type %s", target)
		}
	}
	if ncols%blockSize(ret) != 0 {
		ret = gguf.TensorF16
	}
	return ret, true, nil
}

// hparams: what the rules read of the model's hyperparameters.
type hparams struct {
	arch    string
	nLayer  int // block_count (n_layer_all)
	nExpert int // expert_count
	nGQA    int // n_head / n_head_kv of layer 0 (0 when n_head_kv is 0)
	is70B   bool
}

// chooser holds llama.cpp's quantize_state_impl counters, which make a
// tensor's type depend on how many of its kind came before it.
type chooser struct {
	hp        hparams
	ftype     FileType
	opts      Options
	tied      bool // no output.weight: token_embd is also the output
	nAttnV    int
	iAttnV    int
	iDown     int
	iGate     int
	iUp       int
	nFallback int
	// hasImatrix: an importance matrix was given (qs.has_imatrix), which
	// changes a few choices of the IQ3_XXS, IQ4 and Q4_0/Q5_0 mixes
	hasImatrix bool
}

// layerInfo: the layer of an FFN tensor. With experts the layer comes
// from the name (their tensors are not in layer order in every model);
// otherwise it is the count of such tensors seen so far.
func (c *chooser) layerInfo(i int, name string) (int, error) {
	if c.hp.nExpert <= 1 {
		return i, nil
	}
	l, ok := blockIndex(name)
	if !ok {
		return 0, fmt.Errorf("failed to determine layer for tensor %s", name)
	}
	if l < 0 || l >= c.hp.nLayer {
		return 0, fmt.Errorf("bad layer %d for tensor %s (must be in [0, %d))", l, name, c.hp.nLayer)
	}
	return l, nil
}

func useMoreBits(i, n int) bool { return i < n/8 || i >= 7*n/8 || (i-n/8)%3 == 2 }

// typeFor: llama_tensor_get_type for a tensor that allowsQuantization.
func (c *chooser) typeFor(t gguf.TensorInfo, cat category, def gguf.TensorType) (gguf.TensorType, error) {
	if c.opts.TokenEmbeddingType != nil && cat == catTokenEmbd {
		// per_layer_token_embd follows -token-embedding-type unless a
		// -tensor-type pattern names it
		if t.Name != "per_layer_token_embd.weight" || c.override(t.Name) == nil {
			return *c.opts.TokenEmbeddingType, nil
		}
	}
	if c.opts.OutputType != nil && cat == catOutput {
		return *c.opts.OutputType, nil
	}
	if !isQuantized(def) {
		return def, nil
	}
	typ := def
	if o := c.override(t.Name); o != nil {
		typ = o.Type
	} else if !c.opts.Pure {
		var err error
		if typ, err = c.mix(t, cat, typ); err != nil {
			return 0, err
		}
	}
	typ, fell, err := fallback(t, typ)
	if fell {
		c.nFallback++
	}
	return typ, err
}

// override: the first -tensor-type pattern found in name (a regular
// expression search, as llama.cpp's std::regex_search), or nil.
func (c *chooser) override(name string) *TensorTypeOverride {
	for i := range c.opts.TensorTypes {
		if c.opts.TensorTypes[i].re.MatchString(name) {
			return &c.opts.TensorTypes[i]
		}
	}
	return nil
}

// anyOf: ft is one of fts.
func anyOf(ft FileType, fts ...FileType) bool {
	for _, f := range fts {
		if ft == f {
			return true
		}
	}
	return false
}

// mix: llama_tensor_get_type_impl, the file type's choice of type for
// each kind of tensor, branch for branch in llama.cpp's order.
func (c *chooser) mix(t gguf.TensorInfo, cat category, typ gguf.TensorType) (gguf.TensorType, error) {
	ft, hp := c.ftype, c.hp
	falcon := hp.arch == "falcon"
	if hp.arch == "glm5-next" && (strings.Contains(t.Name, "attn_q_a") || strings.Contains(t.Name, "attn_q_b") ||
		strings.Contains(t.Name, "nextn.eh_proj")) {
		switch typ {
		case gguf.TensorF32, gguf.TensorBF16, gguf.TensorF16:
		default:
			return gguf.TensorQ8_0, nil
		}
	}
	iq12 := anyOf(ft, MostlyIQ2XXS, MostlyIQ2XS, MostlyIQ1S, MostlyIQ2S, MostlyIQ2M, MostlyIQ1M)
	iq2sm := anyOf(ft, MostlyIQ2S, MostlyIQ2M)
	switch {
	case cat == catOutput || (c.tied && cat == catTokenEmbd):
		switch {
		case c.opts.OutputType != nil:
			typ = *c.opts.OutputType
		case ft == MostlyMXFP4MoE:
			typ = gguf.TensorQ8_0
		case falcon || t.Shape[0]%blockSize(typ) != 0:
			typ = gguf.TensorQ8_0
		case anyOf(ft, MostlyIQ2XXS, MostlyIQ2XS, MostlyIQ3XXS, MostlyIQ1S, MostlyIQ2S, MostlyIQ2M, MostlyIQ1M):
			typ = gguf.TensorQ5K
		case typ != gguf.TensorQ8_0:
			typ = gguf.TensorQ6K
		}
	case ft == MostlyMXFP4MoE:
		// experts (3-D) MXFP4, the rest Q8_0; bailingmoe3's MLA
		// projections are 3-D too, so there only the FFN experts
		expert := len(t.Shape) > 2 && t.Shape[2] > 1
		if hp.arch == "bailingmoe3" {
			expert = expert && (cat == catFFNUp || cat == catFFNGate || cat == catFFNDown)
		}
		typ = gguf.TensorQ8_0
		if expert {
			typ = gguf.TensorMXF4
		}
	case cat == catTokenEmbd:
		switch {
		case c.opts.TokenEmbeddingType != nil:
			typ = *c.opts.TokenEmbeddingType
		case anyOf(ft, MostlyIQ2XXS, MostlyIQ2XS, MostlyIQ1S, MostlyIQ1M):
			typ = gguf.TensorQ2K
		case iq2sm || ft == MostlyIQ3XXS:
			typ = gguf.TensorIQ3S
		case anyOf(ft, MostlyTQ1_0, MostlyTQ2_0, MostlyQ2_0):
			typ = gguf.TensorQ4K
		}
	case iq12:
		switch {
		case cat.isAttnV():
			switch {
			case hp.nGQA >= 4 || hp.nExpert >= 4:
				typ = gguf.TensorQ4K
			case iq2sm:
				typ = gguf.TensorIQ3S
			default:
				typ = gguf.TensorQ2K
			}
			c.iAttnV++
		case hp.nExpert == 8 && cat == catAttnK:
			typ = gguf.TensorQ4K
		case cat == catFFNDown:
			// the running count, not the layer of the name
			if c.iDown < hp.nLayer/8 {
				typ = gguf.TensorQ2K
				if iq2sm {
					typ = gguf.TensorIQ3S
				}
			}
			c.iDown++
		case cat == catAttnOutput:
			switch {
			case hp.nExpert == 8:
				typ = gguf.TensorQ5K
			case ft == MostlyIQ1S || ft == MostlyIQ1M:
				typ = gguf.TensorIQ2XXS
			case iq2sm:
				typ = gguf.TensorIQ3S
			}
		}
	case cat.isAttnV():
		switch {
		case ft == MostlyQ2K:
			typ = gguf.TensorQ3K
			if hp.nGQA >= 4 {
				typ = gguf.TensorQ4K
			}
		case ft == MostlyQ2KS && hp.nGQA >= 4:
			typ = gguf.TensorQ4K
		case ft == MostlyIQ3XXS:
			switch {
			case hp.nGQA >= 4:
				typ = gguf.TensorQ4K
			case !c.hasImatrix:
				typ = gguf.TensorIQ3S
			default:
				typ = gguf.TensorIQ3XXS
			}
		case (ft == MostlyIQ3XS || ft == MostlyIQ3S) && hp.nGQA >= 4:
			typ = gguf.TensorQ4K
		case ft == MostlyIQ3M:
			typ = gguf.TensorQ4K
		case ft == MostlyQ3KM:
			typ = gguf.TensorQ4K
			if c.iAttnV < 2 {
				typ = gguf.TensorQ5K
			}
		case ft == MostlyQ3KL:
			typ = gguf.TensorQ5K
		case (ft == MostlyIQ4NL || ft == MostlyIQ4XS) && hp.nGQA >= 4:
			typ = gguf.TensorQ5K
		case (ft == MostlyQ4KM || ft == MostlyQ5KM) && useMoreBits(c.iAttnV, c.nAttnV):
			typ = gguf.TensorQ6K
		case ft == MostlyQ4KS && c.iAttnV < 4:
			typ = gguf.TensorQ5K
		}
		if hp.is70B && (typ == gguf.TensorQ3K || typ == gguf.TensorQ4K) {
			typ = gguf.TensorQ5K
		}
		if hp.nExpert == 8 {
			typ = gguf.TensorQ8_0
		}
		c.iAttnV++
	case cat == catAttnK:
		switch {
		case hp.nExpert == 8:
			typ = gguf.TensorQ8_0
		case ft == MostlyIQ3XS:
			typ = gguf.TensorIQ3XXS
		case ft == MostlyIQ3XXS:
			typ = gguf.TensorIQ2S
		}
	case cat == catAttnQ:
		switch ft {
		case MostlyIQ3XS:
			typ = gguf.TensorIQ3XXS
		case MostlyIQ3XXS:
			typ = gguf.TensorIQ2S
		}
	case cat == catFFNDown:
		i, err := c.layerInfo(c.iDown, t.Name)
		if err != nil {
			return 0, err
		}
		n := hp.nLayer
		switch {
		case ft == MostlyQ2K:
			typ = gguf.TensorQ3K
		case ft == MostlyQ2KS:
			if i < n/8 {
				typ = gguf.TensorQ4K
			}
		case ft == MostlyIQ3XXS && !c.hasImatrix:
			typ = gguf.TensorQ3K
			if i < n/8 {
				typ = gguf.TensorQ4K
			}
		case ft == MostlyQ3KM:
			switch {
			case i < n/16:
				typ = gguf.TensorQ5K
			case !falcon || useMoreBits(i, n):
				typ = gguf.TensorQ4K
			default:
				typ = gguf.TensorQ3K
			}
		case ft == MostlyIQ3M && (i < n/8 || (hp.nExpert == 8 && useMoreBits(i, n))):
			typ = gguf.TensorQ4K
		case ft == MostlyQ3KL:
			typ = gguf.TensorQ5K
			if falcon {
				typ = gguf.TensorQ4K
			}
		case ft == MostlyQ4KM:
			if falcon {
				switch {
				case i < n/16:
					typ = gguf.TensorQ6K
				case useMoreBits(i, n):
					typ = gguf.TensorQ5K
				default:
					typ = gguf.TensorQ4K
				}
			} else if useMoreBits(i, n) {
				typ = gguf.TensorQ6K
			}
		case i < n/8 && (ft == MostlyIQ4NL || ft == MostlyIQ4XS) && !c.hasImatrix:
			typ = gguf.TensorQ5K
		case ft == MostlyQ5KM && useMoreBits(i, n):
			typ = gguf.TensorQ6K
		case ft == MostlyQ4KS && !falcon && i < n/8:
			typ = gguf.TensorQ5K
		case (ft == MostlyQ4_0 || ft == MostlyQ5_0) && c.hasImatrix && i < n/8:
			// llama.cpp guards the first ffn_down layers, with an imatrix only
			typ = gguf.TensorQ4_1
			if ft == MostlyQ5_0 {
				typ = gguf.TensorQ5_1
			}
		}
		c.iDown++
	case cat == catAttnOutput:
		if !falcon {
			if hp.nExpert == 8 {
				if anyOf(ft, MostlyQ2K, MostlyIQ3XS, MostlyIQ3XXS, MostlyQ3KS, MostlyQ3KM, MostlyIQ4NL,
					MostlyQ4KS, MostlyQ4KM, MostlyIQ3S, MostlyIQ3M, MostlyIQ4XS) {
					typ = gguf.TensorQ5K
				}
			} else {
				switch ft {
				case MostlyQ2K:
					typ = gguf.TensorQ3K
				case MostlyIQ3XXS:
					typ = gguf.TensorIQ3S
				case MostlyQ3KM, MostlyIQ3M:
					typ = gguf.TensorQ4K
				case MostlyQ3KL:
					typ = gguf.TensorQ5K
				}
			}
		} else if ft == MostlyQ3KL {
			typ = gguf.TensorQ4K
		}
	case cat == catAttnQKV:
		// unreachable: attn_qkv is attn_v-like and took that branch
	case cat == catFFNGate, cat == catFFNUp:
		counter := &c.iGate
		if cat == catFFNUp {
			counter = &c.iUp
		}
		i, err := c.layerInfo(*counter, t.Name)
		if err != nil {
			return 0, err
		}
		if ft == MostlyIQ3XS && i >= hp.nLayer/8 && i < 7*hp.nLayer/8 {
			typ = gguf.TensorIQ3XXS
		}
		*counter++
	}
	return typ, nil
}
