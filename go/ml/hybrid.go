package ml

// Extension interfaces for the hybrid architectures (Qwen3-Next, Qwen3.5),
// which alternate full attention with gated delta-net linear attention.
// Like ScaledDotProductAttention, they are implemented by the tensors of a
// backend that has the fused kernels; a model type-asserts the tensor and
// falls back to building the computation from primitives when the assertion
// fails:
//
//	if gdn, ok := q.(ml.GatedDeltaNet); ok {
//		out, state = gdn.GatedDeltaNet(ctx, k, v, gate, beta, state, ml.HeadsInterleaved)
//	} else {
//		out, state = chunkedDeltaRule(ctx, q, k, v, gate, beta, state)
//	}

// HeadLayout says which query/key head each value head of GatedDeltaNet
// reads when there are fewer query/key heads (H_k) than value heads (H_v =
// r·H_k).
type HeadLayout int

const (
	// HeadsTiled: value head h reads query/key head h mod H_k (the whole
	// set of query/key heads repeated r times, as Repeat4D does; the layout
	// of GGUFs whose V heads were reordered at conversion).
	HeadsTiled HeadLayout = iota
	// HeadsInterleaved: value head h reads query/key head h / r (each head
	// repeated r times in place, torch's repeat_interleave; Qwen3-Next's
	// checkpoint order).
	HeadsInterleaved
)

// GatedDeltaNet is gated delta-rule linear attention over a recurrent state,
// fused into one kernel. The receiver is the queries.
//
// Shapes (all F32): q, k [S, H_k, T, nSeqs] (dim 0 dense); v [S, H_v, T,
// nSeqs] (dim 0 dense), H_v a multiple of H_k (see HeadLayout); gate [1,
// H_v, T, nSeqs] (one log-decay per head) or [S, H_v, T, nSeqs] (one per
// key dimension), contiguous; beta [1, H_v, T, nSeqs], contiguous; state
// [S, S, H_v, nSeqs], contiguous.
//
// With S_h[i][j] = state[i, j, h, seq] (i the key dimension, dim 0; j the
// value dimension, dim 1), for every token t in order:
//
//	S ← exp(gate_t)·S                      (per-key gate: row i times exp(gate_t[i]))
//	u_j = beta_t·(v_t[j] − Σ_i S[i][j]·k_t[i])
//	S[i][j] ← S[i][j] + k_t[i]·u_j
//	out_t[j] = Σ_i S[i][j]·q_t[i] / √S
//
// q and k are used as given (Qwen3-Next L2-normalises them first), gate is
// the log of the decay (softplus(a + dt_bias)·A in Qwen3-Next, ≤ 0), and
// beta the write strength after its sigmoid.
//
// Returns out [S, H_v, T, nSeqs] and newState [S, S, H_v, nSeqs], the
// state after the last token in the same layout: pass it as state to the
// next call (or Copy it into the cache). Note that this layout is the
// transpose of the one Ollama's primitive qwen3next keeps (its dim 0 is the
// value dimension): a cache written by one cannot be read by the other.
type GatedDeltaNet interface {
	GatedDeltaNet(ctx Context, k, v, gate, beta, state Tensor, heads HeadLayout) (out, newState Tensor)
}

// GatedDeltaNetSnapshots is GatedDeltaNet keeping the states of the batch's
// last n tokens (1 ≤ n ≤ 64), to roll a sequence back after speculative
// decoding rejects some of them: states is [S, S, H_v, nSeqs·n], its
// sequences j·nSeqs to (j+1)·nSeqs−1 the states j tokens before the last
// (j = 0: after the last token); those of j ≥ T are not written.
type GatedDeltaNetSnapshots interface {
	GatedDeltaNetSnapshots(ctx Context, k, v, gate, beta, state Tensor, heads HeadLayout, n int) (out, states Tensor)
}

// GatedDeltaNetInPlace is GatedDeltaNet writing the new state over state
// itself, for a state that is a view of a recurrent cache: the kernel
// updates each head's state where it is, with no copy of it into the
// output and none back into the cache (in decode, two of the three passes
// over the states). It returns ok false, building nothing, where the
// backend cannot (a device other than the CPU could compute it, or a copy
// of the state made for one); then use GatedDeltaNet and copy the state.
// Each compute of the graph applies the update once more.
type GatedDeltaNetInPlace interface {
	GatedDeltaNetInPlace(ctx Context, k, v, gate, beta, state Tensor, heads HeadLayout) (out Tensor, ok bool)
}

// CausalConv is the short causal convolution of the hybrid models over a
// conv state, with the state update, fused. The receiver is the new inputs.
//
// Shapes (all F32): x [channels, T, nSeqs] (as a projection makes them; any
// strides); state [K-1, channels, nSeqs] (the previous K-1 inputs of each
// channel, oldest first); kernel [K, channels] with K ≥ 2, packed rows.
//
// With w = state ++ xᵀ along time (K-1+T inputs per channel):
//
//	out[ch, t, seq] = Σ_{i<K} w[t+i, ch, seq] · kernel[i, ch]   (no activation)
//	newState = w[T .. T+K-1)                                     (the last K-1 inputs)
//
// out is [channels, T, nSeqs]; newState is a contiguous [K-1, channels,
// nSeqs], to pass as state to the next call. The same as
//
//	w := state.Concat(ctx, x.Permute(ctx, 1, 0, 2, 3), 0)
//	out := w.SSMConv(ctx, kernel)
//	newState := w.Slice(ctx, 0, T, T+K-1, 1).Contiguous(ctx)
type CausalConv interface {
	CausalConv(ctx Context, state, kernel Tensor) (out, newState Tensor)
}
