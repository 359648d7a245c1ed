package qwen3next

import (
	"fmt"

	"github.com/ggml-rs/ggml-rs/go/ml"
	"github.com/ggml-rs/ggml-rs/go/model/decoder"
	"github.com/ggml-rs/ggml-rs/go/model/internal/load"
)

// NewMTP reads the multi-token-prediction (MTP, NextN) head of a Qwen3.5
// model (qwen35, qwen35moe): the first of its nextn_predict_layers blocks
// after the main stack, as llama.cpp's graph_mtp runs it. Each token t_p
// comes with the main model's hidden state of the token before it (after
// the output norm); the head predicts t_{p+1}, and its own hidden state
// (Output.Hidden) feeds its next draft step. Its block is a full-attention
// Qwen3.5 block (with a KV cache of its own) and the model's feed-forward
// kind; the embeddings, final norm and head are the block's nextn.* tensors
// where present, the main model's otherwise.
func NewMTP(b ml.Backend) (*decoder.Model, error) {
	h, err := ReadHyper(b)
	if err != nil {
		return nil, err
	}
	arch := b.Config().Architecture()
	if h.NextN < 1 {
		return nil, fmt.Errorf("%s: the model has no MTP layers (%s.nextn_predict_layers is 0 or absent)", arch, arch)
	}
	w := load.NewWeights(b, arch)
	d := h.Hidden
	m := decoder.New(b, arch+"-mtp")
	m.Hidden, m.Vocab, m.Context, m.Eps = d, h.Vocab, h.Context, h.Eps
	tok, norm, out := w.Embeddings(d, h.Vocab)
	ropeOpts, multi := ropeOptions(h)
	m.MultiPositions = multi

	p := fmt.Sprintf("blk.%d.", h.Layers)
	if err := w.Blocks(h.Layers+h.NextN, "nextn.eh_proj.weight"); err != nil {
		return nil, err
	}
	m.NextN = &decoder.NextN{
		ENorm:  w.GetAs(load.F32, p+"nextn.enorm.weight", d),
		HNorm:  w.GetAs(load.F32, p+"nextn.hnorm.weight", d),
		EHProj: w.Get(p+"nextn.eh_proj.weight", 2*d, d),
	}
	m.TokEmb = tok
	if e := w.Opt(p+"nextn.embed_tokens.weight", d, h.Vocab); e != nil {
		m.TokEmb = e
	}
	m.OutNorm = norm
	if n := w.OptAs(load.F32, p+"nextn.shared_head_norm.weight", d); n != nil {
		m.OutNorm = n
	}
	m.Output = out
	if o := w.Opt(p+"nextn.shared_head_head.weight", d, h.Vocab); o != nil {
		m.Output = o
	}
	mixer, spec := attention(w, p, h, ropeOpts)
	m.Blocks = []decoder.Block{block(w, p, h, mixer, spec)}
	if err := w.Err(); err != nil {
		return nil, err
	}
	return m, nil
}
