// Package gemma3n holds the text decoder of llama.cpp's "gemma3n"
// architecture (Google's Gemma 3n, E2B and E4B), as llama.cpp's graph
// computes it. Its layers are Gemma 3's (embeddings scaled by √n_embd,
// sandwich norms, per-head q/k norms, NeoX RoPE with a base of its own on
// the sliding layers, four sliding layers in five, final logit
// soft-capping) with these differences:
//   - AltUp: each token carries n_altup hidden states (altup.num_inputs,
//     4); a layer predicts all of them from the active one
//     (altup.active_idx), runs its attention and feed-forward on that
//     one, and corrects the others by the innovation (altup.go);
//   - Laurel: a low-rank (64) residual beside each attention;
//   - per-layer inputs: every token looks up a vector of
//     embedding_length_per_layer_input (256) per layer, mixed with a
//     projection of its embedding, which gates each layer's correction;
//   - values RMS-normed per head without a weight; the attention itself
//     unscaled (the q norms do it);
//   - KV sharing: the last attention.shared_kv_layers layers compute
//     queries only and attend to the cache of the last earlier layer of
//     their kind (llama.cpp's n_layer_kv_from_start);
//   - activation sparsity: the first layers' feed-forwards keep only the
//     gate values above mean + k·std of each token (activation_sparsity_scale
//     gives k per layer), the GeGLU as two ops;
//   - the final logits always soft-capped (30 unless the file says).
//
// llama.cpp reads few of these keys: it fixes n_altup 4, the active index
// 0, the per-layer size 256, the laurel rank 64, KV from layer 20 on
// shared, sparsity on the first 10 layers with k = 1.6448533 and the cap
// at 30, which the published files also give. This package reads the keys
// Ollama's converter and llama.cpp's write, with those values as defaults.
package gemma3n

import (
	"fmt"
	"math"

	"github.com/ggml-rs/ggml-rs/go/fs"
	"github.com/ggml-rs/ggml-rs/go/kvcache"
	"github.com/ggml-rs/ggml-rs/go/ml"
	"github.com/ggml-rs/ggml-rs/go/model/decoder"
	"github.com/ggml-rs/ggml-rs/go/model/gemma"
	"github.com/ggml-rs/ggml-rs/go/model/internal/load"
)

// Arch is the architecture's name in GGUF files.
const Arch = "gemma3n"

// variant is what Gemma 3n shares with Gemma 3 (package gemma reads those
// hyperparameters).
var variant = gemma.Variant{Arch: Arch, Context: 32768, SWAPattern: 5, Window: 512, SWAOwnRoPE: true, QKNorm: true,
	FinalSoftCap: 30, LocalBaseKey: "rope.freq_base_local"}

// The values llama.cpp fixes (see the package comment).
const (
	defaultAltUp    = 4
	defaultPerLayer = 256
	laurelRank      = 64
	firstSharedKV   = 20
	sparseLayers    = 10
	// sparsityStd is llama.cpp's f_sparsity_std_mul, the standard normal's
	// 0.95 quantile as a float32.
	sparsityStd = float32(1.6448533535003662)
)

// Hyper are Gemma 3n's hyperparameters.
type Hyper struct {
	gemma.Hyper
	AltUp, Active int // hidden states per token, the active one
	PerLayer      int // the per-layer input size
	FirstShared   int // the first layer that shares another's KV
	CorrectScale  bool
	Sparsity      []float32 // per layer: k of the activation sparsity, 0 for none
}

// ReadHyper reads Gemma 3n's hyperparameters.
func ReadHyper(c fs.Config) (Hyper, error) {
	g, err := gemma.ReadHyper(c, variant)
	if err != nil {
		return Hyper{}, err
	}
	r := load.NewReader(c, Arch)
	h := Hyper{Hyper: g}
	h.AltUp = r.Int("altup.num_inputs", defaultAltUp)
	h.Active = r.Int("altup.active_idx", 0)
	h.PerLayer = r.Int("embedding_length_per_layer_input", defaultPerLayer)
	h.CorrectScale = r.Bool("altup.correct_scale", true)
	h.FirstShared = g.Layers - r.Int("attention.shared_kv_layers", max(0, g.Layers-firstSharedKV))
	if h.AltUp < 2 {
		r.Fail("%s = %d must be at least 2", r.Key("altup.num_inputs"), h.AltUp)
	} else if h.Active >= h.AltUp {
		r.Fail("%s = %d must be below %s = %d", r.Key("altup.active_idx"), h.Active, r.Key("altup.num_inputs"), h.AltUp)
	}
	r.Positive("embedding_length_per_layer_input", h.PerLayer)
	if h.FirstShared < 0 {
		r.Fail("%s is more than the %d layers", r.Key("attention.shared_kv_layers"), g.Layers)
	}
	if r.Has("activation_sparsity_scale") {
		h.Sparsity = r.Floats("activation_sparsity_scale", g.Layers)
	} else {
		h.Sparsity = make([]float32, g.Layers)
		for i := range min(sparseLayers, g.Layers) {
			h.Sparsity[i] = sparsityStd
		}
	}
	for _, k := range h.Sparsity {
		if k < 0 {
			r.Fail("%s holds %v, which must not be negative", r.Key("activation_sparsity_scale"), k)
			break
		}
	}
	return h, r.Err()
}

// kvSource is the layer whose keys and values shared layer i reads: the
// last one before the first shared layer of i's kind (llama.cpp: layer 18
// for a sliding layer, 19 for a global one, of the published models'
// pattern), or -1 when there is none.
func (h *Hyper) kvSource(i int) int {
	for j := h.FirstShared - 1; j >= 0; j-- {
		if h.SWA[j] == h.SWA[i] {
			return j
		}
	}
	return -1
}

// New reads a Gemma 3n text model from a backend opened on its GGUF file
// (the weights need not be loaded yet; the vision and audio towers'
// tensors, if any, are not read).
func New(b ml.Backend) (*decoder.Model, error) {
	h, err := ReadHyper(b.Config())
	if err != nil {
		return nil, err
	}
	w := load.NewWeights(b, Arch)
	m, err := w.Start(h.Common)
	if err != nil {
		return nil, err
	}
	d, pl, a := h.Hidden, h.PerLayer, h.AltUp
	m.Window, m.SoftCap = h.Window, h.SoftCap
	m.EmbedScale = float32(math.Sqrt(float64(d)))
	s := &stack{
		blocks: &m.Blocks, hidden: d, perLayer: pl, altUp: a, active: h.Active, eps: h.Eps,
		altUpProj:    w.Get("altup_proj.weight", d, d, a-1),
		altUpUnembd:  w.Get("altup_unembd_proj.weight", d, d, a-1),
		perLayerEmb:  w.Get("per_layer_token_embd.weight", pl*h.Layers, h.Vocab),
		perLayerIn:   w.Get("per_layer_model_proj.weight", d, pl*h.Layers),
		perLayerNorm: w.Norm("per_layer_proj_norm.weight", pl),
	}
	for i := 0; i < h.Layers; i++ {
		p := load.Layer(i)
		bl, at, ffn := gemma.Block(w, &h.Hyper, variant, i)
		at.VNorm, at.KeysBeforeValues = true, true
		if i >= h.FirstShared {
			src := h.kvSource(i)
			if src < 0 {
				return nil, fmt.Errorf("%s: layer %d shares the keys and values of an earlier %s layer (%s.attention.shared_kv_layers), but the first %d layers have none",
					Arch, i, kindName(h.SWA[i]), Arch, h.FirstShared)
			}
			at.SharedKV, at.KVLayer = true, src
			bl.Cache = kvcache.LayerSpec{}
		}
		ffn.SplitGLU, ffn.Sparsity = true, h.Sparsity[i]
		m.Blocks = append(m.Blocks, bl)
		l := layer{
			routerNorm: w.Norm(p+"altup_router_norm.weight", d),
			router:     w.Get(p+"altup_router.weight", d, a),
			predict:    w.Get(p+"altup_predict_coef.weight", a, a*a),
			correct:    w.Get(p+"altup_correct_coef.weight", a, a),
			laurelL:    w.Get(p+"laurel_l.weight", d, laurelRank),
			laurelR:    w.Get(p+"laurel_r.weight", laurelRank, d),
			laurelNorm: w.Norm(p+"laurel_post_norm.weight", d),
			gate:       w.Get(p+"inp_gate.weight", d, pl),
			proj:       w.Get(p+"proj.weight", pl, d),
			postNorm:   w.Norm(p+"post_norm.weight", d),
		}
		if h.CorrectScale {
			l.correctScale = w.Norm(p+"altup_correct_scale.weight", d)
		}
		s.layers = append(s.layers, l)
	}
	if err := w.Err(); err != nil {
		return nil, err
	}
	m.Stack = s
	return m, nil
}

func kindName(swa bool) string {
	if swa {
		return "sliding-window"
	}
	return "global"
}
