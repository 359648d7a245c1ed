package backend

// Convolution, pooling and image ops: Conv2D, Conv3D, Conv1DDW, IM2Col,
// AvgPool2D, Interpolate. Shapes are in ggml order (dim 0 fastest): images
// [W, H, C, N], 2-D kernels [KW, KH, IC, OC]. As in Ollama, Conv2D, Conv3D
// and IM2Col are called on the kernel with the input as argument, Conv1DDW
// on the input with the kernel as argument.

/*
#include "ggml_rs.h"
*/
import "C"

import (
	"fmt"
	"math"

	"github.com/ggml-rs/ggml-rs/go/ml"
)

// int32Arg converts an int argument for a C int32_t, panicking like the
// library does for a bad argument when it does not fit (all ops use it).
func int32Arg(op, what string, v int) C.int32_t {
	if v < math.MinInt32 || v > math.MaxInt32 {
		panic(&Error{Status: StatusInvalidArgument, Message: fmt.Sprintf("%s: %s %d does not fit in 32 bits", op, what, v)})
	}
	return C.int32_t(v)
}

// Conv2D convolves the input t2 [W, H, IC, N] with the kernel t
// [KW, KH, IC, OC] (cross-correlation): strides s0, s1, zero padding p0,
// p1 on both sides, dilations d0, d1 along width and height. The result
// is F32 [OW, OH, OC, N], OW = (W + 2*p0 - d0*(KW-1) - 1)/s0 + 1. Kernel F32
// or F16; input F32 or F16 (ggml computes through F16).
func (t *Tensor) Conv2D(ctx ml.Context, t2 ml.Tensor, s0, s1, p0, p1, d0, d1 int) ml.Tensor {
	const op = "Conv2D"
	c := use(ctx, op)
	return c.result(C.ggml_rs_conv_2d(c.c, t.ptr(op), handle(t2, op),
		int32Arg(op, "s0", s0), int32Arg(op, "s1", s1), int32Arg(op, "p0", p0),
		int32Arg(op, "p1", p1), int32Arg(op, "d0", d0), int32Arg(op, "d1", d1), &c.f.s.err))
}

// Conv3D convolves the input t2 [W, H, D, N*ic] with the kernel t
// [KW, KH, KD, OC*ic] (ic input channels folded into dim 3, channel
// fastest), then, as Ollama does, reshapes the result to [OC, N]: each
// image must give exactly one output position (a patch embedding whose
// stride covers the input). Kernel F32 or F16; input F32.
func (t *Tensor) Conv3D(ctx ml.Context, t2 ml.Tensor, ic, s0, s1, s2, p0, p1, p2, d0, d1, d2 int) ml.Tensor {
	const op = "Conv3D"
	c := use(ctx, op)
	out := c.result(C.ggml_rs_conv_3d(c.c, t.ptr(op), handle(t2, op), C.int64_t(ic),
		int32Arg(op, "s0", s0), int32Arg(op, "s1", s1), int32Arg(op, "s2", s2),
		int32Arg(op, "p0", p0), int32Arg(op, "p1", p1), int32Arg(op, "p2", p2),
		int32Arg(op, "d0", d0), int32Arg(op, "d1", d1), int32Arg(op, "d2", d2), &c.f.s.err))
	// The library checked ic >= 1 and that it divides both dims 3.
	oc, n := t.Dim(3)/ic, t2.Dim(3)/ic
	if out.nelements() != oc*n {
		panic(&Error{Status: StatusShape, Message: fmt.Sprintf(
			"%s: the convolution's output %v has more than one position per image; it cannot be reshaped to [OC, N] = [%d, %d]",
			op, [4]int{out.Dim(0), out.Dim(1), out.Dim(2), out.Dim(3)}, oc, n)})
	}
	return out.Reshape(ctx, oc, n)
}

// Conv1DDW is the depthwise 1-D convolution of the input t [L, C] with the
// kernel weight [K, 1, C*m] (kernel channel j filters input channel j/m):
// stride s, zero padding p on both sides, dilation d. The result is F32
// [OL, C*m], OL = (L + 2*p - d*(K-1) - 1)/s + 1.
func (t *Tensor) Conv1DDW(ctx ml.Context, weight ml.Tensor, s, p, d int) ml.Tensor {
	const op = "Conv1DDW"
	c := use(ctx, op)
	return c.result(C.ggml_rs_conv_1d_dw(c.c, handle(weight, op), t.ptr(op),
		int32Arg(op, "s", s), int32Arg(op, "p", p), int32Arg(op, "d", d), &c.f.s.err))
}

// IM2Col unrolls every window of the kernel t's size [KW, KH, IC, …] (only
// its shape is used) over the F32 input t2 [W, H, IC, N] into a row: F32
// [IC*KH*KW, OW, OH, N], sizes as in Conv2D.
func (t *Tensor) IM2Col(ctx ml.Context, t2 ml.Tensor, s0, s1, p0, p1, d0, d1 int) ml.Tensor {
	const op = "IM2Col"
	c := use(ctx, op)
	return c.result(C.ggml_rs_im2col(c.c, t.ptr(op), handle(t2, op),
		int32Arg(op, "s0", s0), int32Arg(op, "s1", s1), int32Arg(op, "p0", p0),
		int32Arg(op, "p1", p1), int32Arg(op, "d0", d0), int32Arg(op, "d1", d1), &c.f.s.err))
}

// AvgPool2D averages k×k windows of t [W, H, C, N] (F32 or F16) at stride
// s with p zeros of padding on each side (a whole number); the divisor is
// always k*k. The result is F32 [OW, OH, C, N], OW = (W + 2p - k)/s + 1.
func (t *Tensor) AvgPool2D(ctx ml.Context, k, s int, p float32) ml.Tensor {
	const op = "AvgPool2D"
	c := use(ctx, op)
	return c.result(C.ggml_rs_avg_pool_2d(c.c, t.ptr(op), int32Arg(op, "k", k), int32Arg(op, "s", s), C.float(p), &c.f.s.err))
}

// Interpolate resamples the F32 tensor t to dims: nearest, or bilinear
// over dims 0 and 1 (nearest over dims 2 and 3), without corner alignment
// (pixel centres map as (i+0.5)*in/out - 0.5), as Ollama's does.
func (t *Tensor) Interpolate(ctx ml.Context, dims [4]int, samplingMode ml.SamplingMode) ml.Tensor {
	const op = "Interpolate"
	c := use(ctx, op)
	var mode C.int32_t
	switch samplingMode {
	case ml.SamplingModeNearest:
		mode = 0
	case ml.SamplingModeBilinear:
		mode = 1
	default:
		panic("unsupported interpolate mode")
	}
	return c.result(C.ggml_rs_interpolate(c.c, t.ptr(op), C.int64_t(dims[0]), C.int64_t(dims[1]),
		C.int64_t(dims[2]), C.int64_t(dims[3]), mode, false, &c.f.s.err))
}
