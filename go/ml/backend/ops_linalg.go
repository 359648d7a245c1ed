package backend

// Linear algebra and miscellaneous ops: SILUAlphaLimit, Softplus, Fill,
// CumSum, Diag, Tri, SolveTri, PadExt, SetInplace, Repeat4D. (SigmoidOut,
// Variance and Stddev live with the other activations and reductions.)

/*
#include "ggml_rs.h"
*/
import "C"

import (
	"fmt"

	"github.com/ggml-rs/ggml-rs/go/ml"
)

// SILUAlphaLimit is gpt-oss's clamped SwiGLU: with x = min(t, limit) and
// y = clamp(up, -limit, limit), x*sigmoid(alpha*x)*(y+1). t and up: F32 of
// the same shape; alpha finite, limit >= 0.
func (t *Tensor) SILUAlphaLimit(ctx ml.Context, up ml.Tensor, alpha, limit float32) ml.Tensor {
	const op = "SILUAlphaLimit"
	c := use(ctx, op)
	return c.result(C.ggml_rs_silu_alpha_limit(c.c, t.ptr(op), handle(up, op), C.float(alpha), C.float(limit), &c.f.s.err))
}

// Softplus is ln(1 + e^t) element-wise (t itself above 20). F32 or F16.
func (t *Tensor) Softplus(ctx ml.Context) ml.Tensor {
	const op = "Softplus"
	c := use(ctx, op)
	return c.result(C.ggml_rs_softplus(c.c, t.ptr(op), &c.f.s.err))
}

// Fill sets every element of t to value, in place as in Ollama (and as
// ml.Tensor documents): the result is a view of t, and computing it
// overwrites t's memory. t: F32 or F16, contiguous.
func (t *Tensor) Fill(ctx ml.Context, value float32) ml.Tensor {
	const op = "Fill"
	c := use(ctx, op)
	return c.result(C.ggml_rs_fill(c.c, t.ptr(op), C.float(value), C.bool(true), &c.f.s.err))
}

// CumSum is the running sum along dimension 0. F32.
func (t *Tensor) CumSum(ctx ml.Context) ml.Tensor {
	const op = "CumSum"
	c := use(ctx, op)
	return c.result(C.ggml_rs_cumsum(c.c, t.ptr(op), &c.f.s.err))
}

// Diag turns each vector t [n, 1, …] into a diagonal matrix [n, n, …]. F32.
func (t *Tensor) Diag(ctx ml.Context) ml.Tensor {
	const op = "Diag"
	c := use(ctx, op)
	return c.result(C.ggml_rs_diag(c.c, t.ptr(op), &c.f.s.err))
}

// Tri keeps one triangle of each square matrix and zeroes the rest; with
// column i (dimension 0) and row r, triType keeps 0: i >= r (upper with the
// diagonal), 1: i > r (upper), 2: i <= r (lower with the diagonal), 3: i < r
// (lower), ggml's GGML_TRI_TYPE_* values. F32, contiguous.
func (t *Tensor) Tri(ctx ml.Context, triType int) ml.Tensor {
	const op = "Tri"
	c := use(ctx, op)
	return c.result(C.ggml_rs_tri(c.c, t.ptr(op), int32Arg("tri", "type", triType), &c.f.s.err))
}

// SolveTri solves A·X = b for X, A = t [n, n, …] lower triangular (row r
// is t[:, r]) and b [k, n, …]; the result has b's shape. Like Ollama's, it
// passes its lower argument into ggml's left slot and its left argument
// into ggml's lower slot (a swap, invisible for Ollama's only caller,
// qwen3next, which passes (true, true, false)); ggml implements only
// left && lower && !unitDiag, so any other combination panics with
// StatusUnsupported. F32, contiguous.
func (t *Tensor) SolveTri(ctx ml.Context, b ml.Tensor, lower, left, unitDiag bool) ml.Tensor {
	const op = "SolveTri"
	c := use(ctx, op)
	return c.result(C.ggml_rs_solve_tri(c.c, t.ptr(op), handle(b, op), C.bool(lower), C.bool(left), C.bool(unitDiag), &c.f.s.err))
}

// PadExt adds lpN zeros before and rpN zeros after the elements of
// dimension N (all >= 0). F32.
func (t *Tensor) PadExt(ctx ml.Context, lp0, rp0, lp1, rp1, lp2, rp2, lp3, rp3 int) ml.Tensor {
	const op = "PadExt"
	c := use(ctx, op)
	p := func(v int) C.int32_t { return int32Arg("pad_ext", "padding", v) }
	return c.result(C.ggml_rs_pad_ext(c.c, t.ptr(op), p(lp0), p(rp0), p(lp1), p(rp1), p(lp2), p(rp2), p(lp3), p(rp3), &c.f.s.err))
}

// SetInplace writes src into t's memory, seen with src's shape and the
// byte strides (element size, nb1, nb2, nb3) from byte offset of t. The
// result is a view of t (t's shape) and takes effect when forwarded. t: F32
// or I32, contiguous; src the same type. The region must lie inside t.
func (t *Tensor) SetInplace(ctx ml.Context, src ml.Tensor, nb1, nb2, nb3, offset int) ml.Tensor {
	const op = "SetInplace"
	c := use(ctx, op)
	if nb1 < 0 || nb2 < 0 || nb3 < 0 || offset < 0 {
		panic(&Error{Status: StatusInvalidArgument, Message: fmt.Sprintf("set_inplace: negative stride or offset (%d, %d, %d, offset %d)", nb1, nb2, nb3, offset)})
	}
	return c.result(C.ggml_rs_set_inplace(c.c, t.ptr(op), handle(src, op), C.size_t(nb1), C.size_t(nb2), C.size_t(nb3), C.size_t(offset), &c.f.s.err))
}

// Repeat4D tiles t to the shape [dim0, dim1, dim2, dim3] (each a multiple
// of t's dimension). F32, F16, BF16 or I32.
func (t *Tensor) Repeat4D(ctx ml.Context, dim0, dim1, dim2, dim3 int) ml.Tensor {
	const op = "Repeat4D"
	c := use(ctx, op)
	return c.result(C.ggml_rs_repeat_4d(c.c, t.ptr(op), C.int64_t(dim0), C.int64_t(dim1), C.int64_t(dim2), C.int64_t(dim3), &c.f.s.err))
}
