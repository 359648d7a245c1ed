package backend

// Mixture-of-experts routing: MulmatID and AddID.

/*
#include "ggml_rs.h"
*/
import "C"

import "github.com/ggml-rs/ggml-rs/go/ml"

// MulmatID multiplies by the experts that ids routes each token to: t
// holds the stacked experts [K, M, nExpert] (F32, F16, BF16 or quantized),
// t2 the activations [K, nB, nTokens], ids the I32 expert indices
// [nExpertUsed, nTokens] (nExpertUsed a multiple of nB, usually nB is 1 or
// nExpertUsed). The F32 result [M, nExpertUsed, nTokens] holds
// t[:, :, ids[e, tok]] · t2[:, e % nB, tok]. An id outside 0..nExpert is
// found when the graph is computed: Compute then panics with an error
// naming mul_mat_id.
func (t *Tensor) MulmatID(ctx ml.Context, t2, ids ml.Tensor) ml.Tensor {
	const op = "MulmatID"
	c := use(ctx, op)
	return c.result(C.ggml_rs_mul_mat_id(c.c, t.ptr(op), handle(t2, op), handle(ids, op), &c.f.s.err))
}

// AddID adds a per-expert bias: t [n, nExpertUsed, nTokens] plus the row
// of t2 [n, nRows] that the I32 ids [nExpertUsed, nTokens] select, i.e.
// out[:, e, tok] = t[:, e, tok] + t2[:, ids[e, tok]]. F32 only. An id
// outside 0..nRows is found when the graph is computed: Compute then
// panics with an error naming add_id.
func (t *Tensor) AddID(ctx ml.Context, t2, ids ml.Tensor) ml.Tensor {
	const op = "AddID"
	c := use(ctx, op)
	return c.result(C.ggml_rs_add_id(c.c, t.ptr(op), handle(t2, op), handle(ids, op), &c.f.s.err))
}
