package backend

// State-space and linear-attention ops: Ollama's SSMConv and SSMScan, and
// the fused ops of the hybrid architectures behind ml.GatedDeltaNet and
// ml.CausalConv.

/*
#include "ggml_rs.h"
*/
import "C"

import (
	"fmt"

	"github.com/ggml-rs/ggml-rs/go/ml"
)

var (
	_ ml.GatedDeltaNet        = (*Tensor)(nil)
	_ ml.GatedDeltaNetInPlace = (*Tensor)(nil)
	_ ml.CausalConv           = (*Tensor)(nil)
)

// SSMConv is Ollama's SSMConv: t = sx [K-1+T, channels, nSeqs] (conv state
// then inputs along dim 0, packed rows), kernel [K, channels] (packed rows);
// out[ch, t, s] = Σ_i sx[t+i, ch, s]·kernel[i, ch], an F32 [channels, T,
// nSeqs].
func (t *Tensor) SSMConv(ctx ml.Context, kernel ml.Tensor) ml.Tensor {
	const op = "SSMConv"
	c := use(ctx, op)
	return c.result(C.ggml_rs_ssm_conv(c.c, t.ptr(op), handle(kernel, op), &c.f.s.err))
}

// SSMScan is Ollama's SSMScan (Mamba's selective scan, one kept state):
// t = s [d_state, head_dim, n_head, n_slots], x [head_dim, n_head, T,
// nSeqs], dt [n_head, T, nSeqs], A [1 or d_state, n_head], B and C
// [d_state, n_group, T, nSeqs], ids I32 [nSeqs] (the state slot each
// sequence starts from). Returns the 1-D F32 concatenation of y [head_dim,
// n_head, T, nSeqs] and the final states [d_state, head_dim, n_head, nSeqs]
// (the C header documents the recurrence).
func (t *Tensor) SSMScan(ctx ml.Context, x, dt, a, b, cm, ids ml.Tensor) ml.Tensor {
	const op = "SSMScan"
	c := use(ctx, op)
	return c.result(C.ggml_rs_ssm_scan(c.c, t.ptr(op), handle(x, op), handle(dt, op), handle(a, op),
		handle(b, op), handle(cm, op), handle(ids, op), &c.f.s.err))
}

// GatedDeltaNet implements ml.GatedDeltaNet (t is the queries).
func (t *Tensor) GatedDeltaNet(ctx ml.Context, k, v, gate, beta, state ml.Tensor, heads ml.HeadLayout) (ml.Tensor, ml.Tensor) {
	return t.gatedDeltaNet("GatedDeltaNet", ctx, k, v, gate, beta, state, heads, 1)
}

// GatedDeltaNetSnapshots implements ml.GatedDeltaNetSnapshots.
func (t *Tensor) GatedDeltaNetSnapshots(ctx ml.Context, k, v, gate, beta, state ml.Tensor, heads ml.HeadLayout, n int) (ml.Tensor, ml.Tensor) {
	return t.gatedDeltaNet("GatedDeltaNetSnapshots", ctx, k, v, gate, beta, state, heads, n)
}

// GatedDeltaNetInPlace implements ml.GatedDeltaNetInPlace: ok only where
// every device of the backend is a CPU.
func (t *Tensor) GatedDeltaNetInPlace(ctx ml.Context, k, v, gate, beta, state ml.Tensor, heads ml.HeadLayout) (ml.Tensor, bool) {
	const op = "GatedDeltaNetInPlace"
	c := use(ctx, op)
	if !c.f.b.cpuOnly {
		return nil, false
	}
	out := c.result(C.ggml_rs_gated_delta_net_in_place(c.c, t.ptr(op), handle(k, op), handle(v, op), handle(gate, op),
		handle(beta, op), handle(state, op), C.bool(interleavedHeads(op, heads)), &c.f.s.err))
	return out, true
}

// interleavedHeads is heads as the C ABI's interleaved flag.
func interleavedHeads(op string, heads ml.HeadLayout) bool {
	switch heads {
	case ml.HeadsTiled:
		return false
	case ml.HeadsInterleaved:
		return true
	}
	panic(fmt.Sprintf("%s: invalid head layout %d", op, heads))
}

func (t *Tensor) gatedDeltaNet(op string, ctx ml.Context, k, v, gate, beta, state ml.Tensor, heads ml.HeadLayout, n int) (ml.Tensor, ml.Tensor) {
	c := use(ctx, op)
	interleaved := interleavedHeads(op, heads)
	var st *C.ggml_rs_tensor
	out := c.result(C.ggml_rs_gated_delta_net(c.c, t.ptr(op), handle(k, op), handle(v, op), handle(gate, op),
		handle(beta, op), handle(state, op), C.bool(interleaved), C.int64_t(n), &st, &c.f.s.err))
	return out, &Tensor{c: st, f: c.f}
}

// CausalConv implements ml.CausalConv (t is the new inputs).
func (t *Tensor) CausalConv(ctx ml.Context, state, kernel ml.Tensor) (ml.Tensor, ml.Tensor) {
	const op = "CausalConv"
	c := use(ctx, op)
	var st *C.ggml_rs_tensor
	out := c.result(C.ggml_rs_causal_conv(c.c, t.ptr(op), handle(state, op), handle(kernel, op), &st, &c.f.s.err))
	return out, &Tensor{c: st, f: c.f}
}
