// Package nn holds the building blocks that decoder models are made of,
// over the github.com/ggml-rs/ggml-rs/go/ml API: linear layers, gated attention with its options
// (Q/K norms, partial and multi-section RoPE, sinks, sliding windows), the
// dense and mixture-of-experts feed-forward networks, the gated delta-net
// layer of the hybrid architectures (fused or from primitives), LFM2's
// short convolution and Nemotron-H's Mamba-2 mixer.
// Each block mirrors one of llama.cpp's llm_graph_context helpers
// (build_attn, build_ffn, build_moe_ffn, the delta-net base), so a model
// file composes them the way llama.cpp's src/models/*.cpp do and a fix
// lands once.
package nn

import "github.com/ggml-rs/ggml-rs/go/ml"

// KVCache is what attention needs of a cache (kvcache.Cache).
type KVCache interface {
	// Put stores the batch's keys [keyDim, kvHeads, n] and values
	// [valueDim, kvHeads, n] of layer.
	Put(ctx ml.Context, layer int, key, value ml.Tensor)
	// Get returns the layer's cached keys and values (the batch's
	// included) that sequence seq of the batch (an index into its
	// sequences) attends to, and the mask of its tokens (the whole batch's
	// when it has one sequence).
	Get(ctx ml.Context, layer, seq int) (key, value, mask ml.Tensor)
}

// StreamKV is a KVCache whose sequences' cells lie in streams of one size
// (kvcache.Cache.Streams, llama.cpp's non-unified cache): for sequence
// first of an equal batch and those after it whose streams follow, 4-D
// views keys [keyDim, kvHeads, len, count], values [valueDim, kvHeads,
// len, count] and mask [len, tokens, 1, count], so that one attention op
// computes count sequences (count 0: not available).
type StreamKV interface {
	Streams(ctx ml.Context, layer, first int) (key, value, mask ml.Tensor, count int)
}

// RowWiseKV is a KVCache that can give each token of a batch the history
// a one-token batch would have seen (kvcache.Ubatch.RowWise): attention
// then runs token by token, bit for bit as one-token decoding does.
type RowWiseKV interface {
	RowWise() bool
	GetRow(ctx ml.Context, layer, t int) (key, value, mask ml.Tensor)
}

// RecurrentCache is what a delta-net layer needs of a cache. The Set
// methods may write the new state over the old one in place (the graph
// runs in the order it was built): a layer calls them after every node
// that reads the old state is in the graph (ctx.Forward of its output).
type RecurrentCache interface {
	// ConvState is [convWidth-1, channels, sequences].
	ConvState(ctx ml.Context, layer int) ml.Tensor
	SetConvState(ctx ml.Context, layer int, state ml.Tensor)
	// DeltaState is [stateSize, stateSize (Mamba-2: its head size), heads,
	// sequences].
	DeltaState(ctx ml.Context, layer int) ml.Tensor
	SetDeltaState(ctx ml.Context, layer int, state ml.Tensor)
	// DeltaStateInPlace is DeltaState and whether updating it where it is
	// stores the new state as SetDeltaState would (a view of the batch's
	// own rows, none starting afresh, one state kept).
	DeltaStateInPlace(ctx ml.Context, layer int) (ml.Tensor, bool)
	// StatesKept is m, how many states per sequence the cache keeps of the
	// batch: those after each of its last m tokens, so that it can rewind
	// past some of them; 1 (only the final state) unless asked. With m >
	// 1, SetDeltaState takes them all, the last first ([.., sequences·m],
	// sequence-minor), and the convolution states go to SetConvStates.
	StatesKept() int
	// SetConvStates stores the convolution states after each of the
	// batch's last m tokens: states[j] is the one j tokens before the
	// last, [convWidth-1, channels, sequences] (any strides: views of the
	// convolution's input window).
	SetConvStates(ctx ml.Context, layer int, states []ml.Tensor)
}

// Cache is a cache for both kinds of layers.
type Cache interface {
	KVCache
	RecurrentCache
}

// Batch is what a layer needs to know of the batch in the graph being
// built.
type Batch struct {
	// Positions of the tokens: I32 [n] (or [4n] for multi-section RoPE).
	Positions ml.Tensor
	// AttnScale is the per-token attention temperature, F32 [1, 1, n], of
	// models that scale their queries by position (nil otherwise).
	AttnScale ml.Tensor
	// Tokens is n; the tokens are sequence-major, Seqs sequences of
	// SeqTokens tokens each when the batch is equal (as recurrent layers
	// need; SeqTokens·Seqs = Tokens), else Seqs is 0.
	Tokens, Seqs, SeqTokens int
	Cache                   Cache
}

// Linear is a weight [in, out] (ggml order) with an optional bias [out].
type Linear struct {
	Weight, Bias ml.Tensor
}

// Forward is Weight·x (+ Bias): x [in, ...] → [out, ...].
func (l Linear) Forward(ctx ml.Context, x ml.Tensor) ml.Tensor {
	y := l.Weight.Mulmat(ctx, x)
	if l.Bias != nil {
		y = y.Add(ctx, l.Bias)
	}
	return y
}
