package backend

// The tensor operations. Each builds one graph node with one C call and
// allocates only the returned *Tensor; a rejected op panics with the
// library's message and leaves the context usable.

/*
#include "ggml_rs.h"
*/
import "C"

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/ggml-rs/ggml-rs/go/ml"
	"github.com/ggml-rs/ggml-rs/go/ml/nn/rope"
)

// ---- arithmetic ------------------------------------------------------------

// Add is t + t2, t2 broadcast to t's shape.
func (t *Tensor) Add(ctx ml.Context, t2 ml.Tensor) ml.Tensor {
	c := use(ctx, "Add")
	return c.result(C.ggml_rs_add(c.c, t.ptr("Add"), handle(t2, "Add"), &c.f.s.err))
}

// Sub is t - t2, t2 broadcast to t's shape.
func (t *Tensor) Sub(ctx ml.Context, t2 ml.Tensor) ml.Tensor {
	c := use(ctx, "Sub")
	return c.result(C.ggml_rs_sub(c.c, t.ptr("Sub"), handle(t2, "Sub"), &c.f.s.err))
}

// Mul is t * t2 element-wise, t2 broadcast to t's shape.
func (t *Tensor) Mul(ctx ml.Context, t2 ml.Tensor) ml.Tensor {
	c := use(ctx, "Mul")
	return c.result(C.ggml_rs_mul(c.c, t.ptr("Mul"), handle(t2, "Mul"), &c.f.s.err))
}

// Div is t / t2 element-wise, t2 broadcast to t's shape.
func (t *Tensor) Div(ctx ml.Context, t2 ml.Tensor) ml.Tensor {
	c := use(ctx, "Div")
	return c.result(C.ggml_rs_div(c.c, t.ptr("Div"), handle(t2, "Div"), &c.f.s.err))
}

// Scale is t * s.
func (t *Tensor) Scale(ctx ml.Context, s float64) ml.Tensor {
	c := use(ctx, "Scale")
	return c.result(C.ggml_rs_scale(c.c, t.ptr("Scale"), C.float(s), &c.f.s.err))
}

// Clamp limits t to [min, max].
func (t *Tensor) Clamp(ctx ml.Context, min, max float32) ml.Tensor {
	c := use(ctx, "Clamp")
	return c.result(C.ggml_rs_clamp(c.c, t.ptr("Clamp"), C.float(min), C.float(max), &c.f.s.err))
}

// ---- unary -----------------------------------------------------------------

func (t *Tensor) Sqr(ctx ml.Context) ml.Tensor {
	c := use(ctx, "Sqr")
	return c.result(C.ggml_rs_sqr(c.c, t.ptr("Sqr"), &c.f.s.err))
}

func (t *Tensor) Sqrt(ctx ml.Context) ml.Tensor {
	c := use(ctx, "Sqrt")
	return c.result(C.ggml_rs_sqrt(c.c, t.ptr("Sqrt"), &c.f.s.err))
}

func (t *Tensor) Exp(ctx ml.Context) ml.Tensor {
	c := use(ctx, "Exp")
	return c.result(C.ggml_rs_exp(c.c, t.ptr("Exp"), &c.f.s.err))
}

func (t *Tensor) Neg(ctx ml.Context) ml.Tensor {
	c := use(ctx, "Neg")
	return c.result(C.ggml_rs_neg(c.c, t.ptr("Neg"), &c.f.s.err))
}

func (t *Tensor) Sin(ctx ml.Context) ml.Tensor {
	c := use(ctx, "Sin")
	return c.result(C.ggml_rs_sin(c.c, t.ptr("Sin"), &c.f.s.err))
}

func (t *Tensor) Cos(ctx ml.Context) ml.Tensor {
	c := use(ctx, "Cos")
	return c.result(C.ggml_rs_cos(c.c, t.ptr("Cos"), &c.f.s.err))
}

// Tanh is out of place (Ollama's is in place; see docs/notes/unlike-ollama.md).
func (t *Tensor) Tanh(ctx ml.Context) ml.Tensor {
	c := use(ctx, "Tanh")
	return c.result(C.ggml_rs_tanh(c.c, t.ptr("Tanh"), &c.f.s.err))
}

// Sigmoid is out of place (Ollama's is in place).
func (t *Tensor) Sigmoid(ctx ml.Context) ml.Tensor {
	c := use(ctx, "Sigmoid")
	return c.result(C.ggml_rs_sigmoid(c.c, t.ptr("Sigmoid"), &c.f.s.err))
}

// SigmoidOut is the out-of-place sigmoid (the same as Sigmoid here).
func (t *Tensor) SigmoidOut(ctx ml.Context) ml.Tensor {
	c := use(ctx, "SigmoidOut")
	return c.result(C.ggml_rs_sigmoid(c.c, t.ptr("SigmoidOut"), &c.f.s.err))
}

// upArg is the optional gate argument of the activations.
func upArg(up []ml.Tensor, op string) *C.ggml_rs_tensor {
	if len(up) == 0 {
		return nil
	}
	return handle(up[0], op)
}

// SILU is silu(t), or silu(t)*up[0] (SwiGLU) when up is given.
func (t *Tensor) SILU(ctx ml.Context, up ...ml.Tensor) ml.Tensor {
	c := use(ctx, "SILU")
	return c.result(C.ggml_rs_silu(c.c, t.ptr("SILU"), upArg(up, "SILU"), &c.f.s.err))
}

// GELU is gelu(t) (tanh approximation), or gelu(t)*up[0] (GeGLU).
func (t *Tensor) GELU(ctx ml.Context, up ...ml.Tensor) ml.Tensor {
	c := use(ctx, "GELU")
	return c.result(C.ggml_rs_gelu(c.c, t.ptr("GELU"), upArg(up, "GELU"), &c.f.s.err))
}

// GELU_ERF is the exact (erf) GELU.
func (t *Tensor) GELU_ERF(ctx ml.Context) ml.Tensor {
	c := use(ctx, "GELU_ERF")
	return c.result(C.ggml_rs_gelu_erf(c.c, t.ptr("GELU_ERF"), nil, &c.f.s.err))
}

// QuickGELU is x*sigmoid(1.702x), or that times up[0].
func (t *Tensor) QuickGELU(ctx ml.Context, up ...ml.Tensor) ml.Tensor {
	c := use(ctx, "QuickGELU")
	return c.result(C.ggml_rs_gelu_quick(c.c, t.ptr("QuickGELU"), upArg(up, "QuickGELU"), &c.f.s.err))
}

// RELU is max(t, 0), or that times up[0] (ReGLU).
func (t *Tensor) RELU(ctx ml.Context, up ...ml.Tensor) ml.Tensor {
	c := use(ctx, "RELU")
	return c.result(C.ggml_rs_relu(c.c, t.ptr("RELU"), upArg(up, "RELU"), &c.f.s.err))
}

// ---- normalization and reductions -----------------------------------------

// Softmax over dim 0.
func (t *Tensor) Softmax(ctx ml.Context) ml.Tensor {
	c := use(ctx, "Softmax")
	return c.result(C.ggml_rs_softmax(c.c, t.ptr("Softmax"), &c.f.s.err))
}

// RMSNorm normalizes over dim 0, then multiplies by weight if given.
func (t *Tensor) RMSNorm(ctx ml.Context, weight ml.Tensor, eps float32) ml.Tensor {
	c := use(ctx, "RMSNorm")
	return c.result(C.ggml_rs_rms_norm(c.c, t.ptr("RMSNorm"), handle(weight, "RMSNorm"), C.float(eps), &c.f.s.err))
}

// LayerNorm normalizes over dim 0, then applies weight and (only with a
// weight) bias.
func (t *Tensor) LayerNorm(ctx ml.Context, weight, bias ml.Tensor, eps float32) ml.Tensor {
	c := use(ctx, "LayerNorm")
	return c.result(C.ggml_rs_layer_norm(c.c, t.ptr("LayerNorm"), handle(weight, "LayerNorm"), handle(bias, "LayerNorm"), C.float(eps), &c.f.s.err))
}

// L2Norm divides by the L2 norm over dim 0.
func (t *Tensor) L2Norm(ctx ml.Context, eps float32) ml.Tensor {
	c := use(ctx, "L2Norm")
	return c.result(C.ggml_rs_l2_norm(c.c, t.ptr("L2Norm"), C.float(eps), &c.f.s.err))
}

// SumRows sums over dim 0 (which becomes 1).
func (t *Tensor) SumRows(ctx ml.Context) ml.Tensor {
	c := use(ctx, "SumRows")
	return c.result(C.ggml_rs_sum_rows(c.c, t.ptr("SumRows"), &c.f.s.err))
}

// Mean averages over dim 0 (which becomes 1).
func (t *Tensor) Mean(ctx ml.Context) ml.Tensor {
	c := use(ctx, "Mean")
	return c.result(C.ggml_rs_mean(c.c, t.ptr("Mean"), &c.f.s.err))
}

// Variance is the population variance over dim 0.
func (t *Tensor) Variance(ctx ml.Context) ml.Tensor {
	centered := t.Add(ctx, t.Mean(ctx).Scale(ctx, -1))
	return centered.Sqr(ctx).SumRows(ctx).Scale(ctx, 1/float64(t.Dim(0)))
}

// Stddev is the population standard deviation over dim 0.
func (t *Tensor) Stddev(ctx ml.Context) ml.Tensor {
	return t.Variance(ctx).Sqrt(ctx)
}

// ---- matrix products --------------------------------------------------------

// Mulmat: t=[K,M,…], t2=[K,N,…] → [M,N,…] (t2·tᵀ), t broadcast over the
// batch dims.
func (t *Tensor) Mulmat(ctx ml.Context, t2 ml.Tensor) ml.Tensor {
	c := use(ctx, "Mulmat")
	return c.result(C.ggml_rs_mul_mat(c.c, t.ptr("Mulmat"), handle(t2, "Mulmat"), &c.f.s.err))
}

// MulmatFullPrec is Mulmat with F32 accumulation requested.
func (t *Tensor) MulmatFullPrec(ctx ml.Context, t2 ml.Tensor) ml.Tensor {
	c := use(ctx, "MulmatFullPrec")
	return c.result(C.ggml_rs_mul_mat_full_prec(c.c, t.ptr("MulmatFullPrec"), handle(t2, "MulmatFullPrec"), &c.f.s.err))
}

// ---- shapes and views -------------------------------------------------------

// shapeArg copies a shape with at most one -1 into the family's C scratch,
// applying Ollama's checks that need no tensor metadata (the rest, such as
// "cannot infer dimension" or a 0 in the shape of a tensor with elements,
// come from the library; a tensor without elements, such as the rows of a
// batch that has no outputs, may take a shape with a 0).
func (c *Context) shapeArg(shape []int) *C.int64_t {
	if len(shape) > 4 {
		panic("unsupported number of dimensions")
	}
	inferring := slices.Contains(shape, -1)
	inferred := false
	for i, d := range shape {
		switch {
		case d == -1:
			if inferred {
				panic("only one dimension can be inferred")
			}
			inferred = true
		case d == 0 && inferring:
			panic("dimension cannot be zero")
		}
		c.f.s.ne[i] = C.int64_t(d)
	}
	return &c.f.s.ne[0]
}

// Reshape gives t a new shape with the same number of elements (one
// dimension may be -1: inferred). A non-contiguous t is copied first.
func (t *Tensor) Reshape(ctx ml.Context, shape ...int) ml.Tensor {
	c := use(ctx, "Reshape")
	if len(shape) == 0 {
		panic("unsupported number of dimensions")
	}
	ne := c.shapeArg(shape)
	return c.result(C.ggml_rs_reshape(c.c, t.ptr("Reshape"), ne, C.size_t(len(shape)), &c.f.s.err))
}

// Contiguous copies t into dense layout, optionally reshaping it.
func (t *Tensor) Contiguous(ctx ml.Context, shape ...int) ml.Tensor {
	c := use(ctx, "Contiguous")
	ne := c.shapeArg(shape)
	return c.result(C.ggml_rs_cont(c.c, t.ptr("Contiguous"), ne, C.size_t(len(shape)), &c.f.s.err))
}

// View is a view of t at byte offset. shape interleaves sizes and byte
// strides: (ne0), (ne0, nb1, ne1), (ne0, nb1, ne1, nb2, ne2) or
// (ne0, nb1, ne1, nb2, ne2, nb3, ne3).
func (t *Tensor) View(ctx ml.Context, offset int, shape ...int) ml.Tensor {
	c := use(ctx, "View")
	switch len(shape) {
	case 1, 3, 5, 7:
	default:
		panic("unsupported number of dimensions")
	}
	s := c.f.s
	dims := (len(shape) + 1) / 2
	for i := 0; i < dims; i++ {
		s.ne[i] = C.int64_t(shape[2*i])
		if i > 0 {
			s.nb[i-1] = C.size_t(shape[2*i-1])
		}
	}
	return c.result(C.ggml_rs_view(c.c, t.ptr("View"), C.size_t(offset), &s.ne[0], &s.nb[0], C.size_t(dims), &s.err))
}

// Permute moves axis i of t to position order[i]. order has as many
// entries as t has dimensions, or 4; missing axes stay in place.
func (t *Tensor) Permute(ctx ml.Context, order ...int) ml.Tensor {
	c := use(ctx, "Permute")
	if len(order) != 4 && len(order) != len(t.Shape()) {
		panic("invalid number of dimensions for permute")
	}
	var o [4]int
	for i := range o {
		if i < len(order) {
			o[i] = order[i]
		} else {
			o[i] = i
		}
	}
	return c.result(C.ggml_rs_permute(c.c, t.ptr("Permute"), C.int32_t(o[0]), C.int32_t(o[1]), C.int32_t(o[2]), C.int32_t(o[3]), &c.f.s.err))
}

// Pad appends shape[i] zeros at the end of dimension i (exactly 4 values,
// the last 0).
func (t *Tensor) Pad(ctx ml.Context, shape ...int) ml.Tensor {
	c := use(ctx, "Pad")
	if len(shape) != 4 {
		panic("expected 4 dimensions")
	} else if shape[3] != 0 {
		panic("cuda does not support 4d tensors")
	}
	return c.result(C.ggml_rs_pad(c.c, t.ptr("Pad"), C.int32_t(shape[0]), C.int32_t(shape[1]), C.int32_t(shape[2]), C.int32_t(shape[3]), &c.f.s.err))
}

// Concat joins t and t2 along dim.
func (t *Tensor) Concat(ctx ml.Context, t2 ml.Tensor, dim int) ml.Tensor {
	c := use(ctx, "Concat")
	return c.result(C.ggml_rs_concat(c.c, t.ptr("Concat"), handle(t2, "Concat"), C.int32_t(dim), &c.f.s.err))
}

// Stack concatenates t, s[0], s[1], … along the existing dimension dim.
func (t *Tensor) Stack(ctx ml.Context, dim int, s ...ml.Tensor) ml.Tensor {
	if len(s) == 0 {
		return t
	}
	// Right fold, as Ollama builds it: t ++ (s0 ++ (s1 ++ …)).
	return t.Concat(ctx, s[0].Stack(ctx, dim, s[1:]...), dim)
}

// Repeat tiles the whole tensor n times along dim.
func (t *Tensor) Repeat(ctx ml.Context, dim, n int) ml.Tensor {
	c := use(ctx, "Repeat")
	if dim < 0 || dim >= 4 {
		panic("invalid dimension")
	}
	return c.result(C.ggml_rs_repeat(c.c, t.ptr("Repeat"), C.int32_t(dim), C.int64_t(n), &c.f.s.err))
}

// Slice takes elements low, low+step, … below high of dimension dim: a
// view, except a copy for step > 1 on dim 0 (Ollama's rules).
func (t *Tensor) Slice(ctx ml.Context, dim, low, high, step int) ml.Tensor {
	c := use(ctx, "Slice")
	if dim < 0 || dim >= 4 {
		panic("invalid dimension")
	} else if low < 0 || low >= high || step < 1 {
		panic("invalid slice parameters")
	}
	return c.result(C.ggml_rs_slice(c.c, t.ptr("Slice"), C.int32_t(dim), C.int64_t(low), C.int64_t(high), C.int64_t(step), &c.f.s.err))
}

// Chunk splits dim into pieces of size (the last may be smaller), as views.
func (t *Tensor) Chunk(ctx ml.Context, dim, size int) []ml.Tensor {
	if size < 1 {
		panic("invalid chunk size")
	}
	n := t.Dim(dim)
	sections := make([]int, 0, (n+size-1)/size)
	for rest := n; rest > 0; rest -= size {
		sections = append(sections, min(size, rest))
	}
	return t.ChunkSections(ctx, dim, sections...)
}

// ChunkSections splits dim into consecutive views of the given sizes,
// which must add up to the dimension.
func (t *Tensor) ChunkSections(ctx ml.Context, dim int, sections ...int) []ml.Tensor {
	total := 0
	for _, s := range sections {
		total += s
	}
	if total != t.Dim(dim) {
		panic("sections do not sum to tensor dimension")
	}
	out := make([]ml.Tensor, len(sections))
	offset := 0
	for i, s := range sections {
		out[i] = t.Slice(ctx, dim, offset, offset+s, 1)
		offset += s
	}
	return out
}

// Duplicate copies t.
func (t *Tensor) Duplicate(ctx ml.Context) ml.Tensor {
	c := use(ctx, "Duplicate")
	return c.result(C.ggml_rs_dup(c.c, t.ptr("Duplicate"), &c.f.s.err))
}

// ---- indexing and copies --------------------------------------------------

// Rows gathers the rows of t at the I32 indices t2 (embedding lookup).
func (t *Tensor) Rows(ctx ml.Context, t2 ml.Tensor) ml.Tensor {
	c := use(ctx, "Rows")
	return c.result(C.ggml_rs_get_rows(c.c, t.ptr("Rows"), handle(t2, "Rows"), &c.f.s.err))
}

// SetRows writes the rows of src into t at the I32 indices idxs; the
// result is a view of t and takes effect when forwarded.
func (t *Tensor) SetRows(ctx ml.Context, src ml.Tensor, idxs ml.Tensor) ml.Tensor {
	c := use(ctx, "SetRows")
	return c.result(C.ggml_rs_set_rows(c.c, t.ptr("SetRows"), handle(src, "SetRows"), handle(idxs, "SetRows"), &c.f.s.err))
}

// Copy writes t into t2 (converting the type); the result is a view of t2
// and takes effect when forwarded.
func (t *Tensor) Copy(ctx ml.Context, t2 ml.Tensor) ml.Tensor {
	c := use(ctx, "Copy")
	return c.result(C.ggml_rs_cpy(c.c, t.ptr("Copy"), handle(t2, "Copy"), &c.f.s.err))
}

// Cast converts t to dtype.
func (t *Tensor) Cast(ctx ml.Context, dtype ml.DType) ml.Tensor {
	c := use(ctx, "Cast")
	return c.result(C.ggml_rs_cast(c.c, t.ptr("Cast"), ggmlType(dtype), &c.f.s.err))
}

// Argsort is the I32 ascending order of each row (dim 0).
func (t *Tensor) Argsort(ctx ml.Context) ml.Tensor {
	c := use(ctx, "Argsort")
	return c.result(C.ggml_rs_argsort(c.c, t.ptr("Argsort"), 0, &c.f.s.err))
}

// TopK is the I32 indices of the k largest values of each row (a view).
func (t *Tensor) TopK(ctx ml.Context, k int) ml.Tensor {
	c := use(ctx, "TopK")
	return c.result(C.ggml_rs_top_k(c.c, t.ptr("TopK"), C.int64_t(k), &c.f.s.err))
}

// ---- RoPE and attention ---------------------------------------------------

// RoPE rotates the first ropeDim values of each head of
// t=[headDim, heads, seq, …] by the I32 positions (reached through
// Ollama's nn.RoPE and its fastRoPE interface). A quantized t is
// converted to F32 first.
func (t *Tensor) RoPE(ctx ml.Context, positions ml.Tensor, ropeDim int, ropeBase, ropeScale float32, options ...func(*rope.Options)) ml.Tensor {
	c := use(ctx, "RoPE")
	opts := &c.f.ropeOpts
	*opts = rope.Options{}
	for _, o := range options {
		o(opts)
	}
	if len(opts.MRoPE.Sections) > 4 {
		panic(fmt.Sprintf("RoPE: at most 4 M-RoPE sections, got %d", len(opts.MRoPE.Sections)))
	}

	p := &c.f.s.rope
	*p = C.ggml_rs_rope_params{
		n_dims:      C.int32_t(ropeDim),
		mode:        C.int32_t(opts.Type),
		n_ctx_orig:  C.int32_t(cmp.Or(opts.YaRN.OriginalContextLength, 128<<10)),
		freq_base:   C.float(ropeBase),
		freq_scale:  C.float(ropeScale),
		ext_factor:  C.float(opts.YaRN.ExtrapolationFactor),
		attn_factor: C.float(cmp.Or(opts.YaRN.AttentionFactor, 1)),
		beta_fast:   C.float(cmp.Or(opts.YaRN.BetaFast, 32)),
		beta_slow:   C.float(cmp.Or(opts.YaRN.BetaSlow, 1)),
	}
	for i, s := range opts.MRoPE.Sections {
		p.sections[i] = C.int32_t(s)
	}
	factors := opts.Factors
	*opts = rope.Options{} // keep no references
	return c.result(C.ggml_rs_rope(c.c, t.ptr("RoPE"), handle(positions, "RoPE"), handle(factors, "RoPE"), p, &c.f.s.err))
}

// ScaledDotProductAttention: t is the query [dk, heads, seqQ, …], key
// [dk, kvHeads, seqK], value [dv, kvHeads, seqK] (or, when the cache
// applied CacheConfig's PermutedV, [seqK, dv, kvHeads]). Flash attention
// is used iff the backend was created with FlashAttentionEnabled, or with
// FlashAttentionAuto and every device that runs attention supports it.
func (t *Tensor) ScaledDotProductAttention(ctx ml.Context, key, value, mask, sinks ml.Tensor, vmla ml.Tensor, scale float64, cacheConfigApplied bool) ml.Tensor {
	c := use(ctx, "ScaledDotProductAttention")
	b := c.f.b
	cfg := b.CacheConfig()
	if !cacheConfigApplied {
		// No cache prepared the inputs: do what it would have.
		if cfg.PermutedV {
			value = value.Permute(ctx, 1, 2, 0, 3).Contiguous(ctx)
		}
		if mask != nil {
			want := cfg.MaskDType
			if want == ml.DTypeOther {
				want = ml.DTypeF32 // CacheConfig: unset means F32
			}
			if mask.DType() != want {
				mask = mask.Cast(ctx, want)
			}
		}
	}
	// V is in the permuted layout whenever the config asks for it: either
	// the cache applied it or the step above did.
	flash := b.flash
	const op = "ScaledDotProductAttention"
	return c.result(C.ggml_rs_sdpa(c.c, t.ptr(op), handle(key, op), handle(value, op),
		handle(mask, op), handle(sinks, op), handle(vmla, op),
		C.float(scale), C.bool(flash), C.bool(cfg.PermutedV), &c.f.s.err))
}

// SoftCappedAttention is ScaledDotProductAttention over a cache's keys and
// values with the scores soft-capped (ml.SoftCappedAttention).
func (t *Tensor) SoftCappedAttention(ctx ml.Context, key, value, mask, sinks ml.Tensor, scale, softcap float64) ml.Tensor {
	const op = "SoftCappedAttention"
	c := use(ctx, op)
	b := c.f.b
	return c.result(C.ggml_rs_sdpa_capped(c.c, t.ptr(op), handle(key, op), handle(value, op),
		handle(mask, op), handle(sinks, op), nil,
		C.float(scale), C.float(softcap), C.bool(b.flash), C.bool(b.CacheConfig().PermutedV), &c.f.s.err))
}

// ---- operations of later issues --------------------------------------------

func notImplemented(op string) {
	panic(&Error{Status: StatusUnsupported, Message: op + " is not implemented yet"})
}
