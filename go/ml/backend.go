// Package ml is the tensor API that model code programs against: a Backend
// owns devices (and, later, model weights), a Context builds a lazy graph
// of Tensor operations, and Compute runs it. The declarations follow
// Ollama's ml package so that model code written for it works unchanged.
package ml

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/ggml-rs/ggml-rs/go/fs"
)

// Backend is a set of devices, a scheduler and (once models can be loaded)
// a model's weights.
type Backend interface {
	// Close frees all memory associated with this backend
	Close()

	Load(ctx context.Context, progress func(float32)) error

	// BackendMemory returns the memory allocations that were made for this model
	BackendMemory() BackendMemory

	Config() fs.Config
	Get(name string) Tensor
	NewContext() Context
	NewContextSize(size int) Context

	// Enumerate the devices available for inference via this backend
	BackendDevices() []DeviceInfo
}

// BackendCacheConfig is implemented by backends whose attention kernels
// want the KV cache to prepare its output in a particular way. Caches
// type-assert the backend for it.
type BackendCacheConfig interface {
	CacheConfig() CacheConfig
}

// CacheConfig describes how a KV cache should lay out what Get returns.
type CacheConfig struct {
	// CachePadding rounds the cache capacity, and the history length that
	// Get returns for k, v and mask, up to a multiple of this value.
	CachePadding int

	// PermutedV stores v as Permute(ctx, 1, 2, 0, 3) of what Put receives
	// (written element-wise through the cache copy), so Get returns it in
	// the layout the non-flash attention product wants without a
	// Contiguous.
	PermutedV bool

	// MaskDType is the mask's data type. Unset (DTypeOther) means DTypeF32.
	MaskDType DType
}

// MaxThreads is the most CPU threads a backend takes (ggml's
// GGML_MAX_N_THREADS); NewBackend refuses more.
const MaxThreads = 512

// BackendParams controls how the backend loads and executes models
type BackendParams struct {
	// AllocMemory causes the backend to allocate memory for the model. If
	// false, the backend only measures the memory a model needs and cannot
	// run it.
	AllocMemory bool

	// NumThreads sets the number of threads to use if running on the CPU
	NumThreads int

	// GPULayers is the set of layers to offload to GPUs
	GPULayers GPULayersList

	// FlashAttention indicates that we should use a fused flash attention kernel
	FlashAttention FlashAttentionType
}

var backends = make(map[string]func(string, BackendParams) (Backend, error))

// RegisterBackend makes a backend constructor available under name. It
// panics if the name is taken.
func RegisterBackend(name string, f func(string, BackendParams) (Backend, error)) {
	if _, taken := backends[name]; taken {
		panic("backend: backend already registered")
	}
	backends[name] = f
}

// NewBackend creates a backend with the constructor registered as "ggml".
func NewBackend(modelPath string, params BackendParams) (Backend, error) {
	f, ok := backends["ggml"]
	if !ok {
		return nil, fmt.Errorf("unsupported backend")
	}
	return f(modelPath, params)
}

// Context builds a graph of tensor operations and runs it.
type Context interface {
	Empty(dtype DType, shape ...int) Tensor
	Zeros(dtype DType, shape ...int) Tensor
	FromBytes(dtype DType, s []byte, shape ...int) Tensor
	FromFloats(s []float32, shape ...int) Tensor
	FromInts(s []int32, shape ...int) Tensor

	// Arange creates a 1D tensor with values within an interval (start, stop] increased by step.
	Arange(start, stop, step float32, dtype DType) Tensor

	Forward(...Tensor) Context

	// SetBatchSize provides a hint on the batch size to optimize processing
	// Uses heuristics if not set
	SetBatchSize(int)

	Compute(...Tensor)
	ComputeWithNotify(func(), ...Tensor) // notify callback once compute has begun

	// Reserve is analogous to Compute but rather than executing a
	// graph, simply preallocates memory. Typically called with a
	// worst case graph to ensure all resources are available for
	// for future inference.
	Reserve()

	MaxGraphNodes() int
	Close()

	// Input returns a context appropriate for creating tensors that are
	// inputs to the model (which includes things like output locations)
	Input() Context

	// Layer returns a context appropriate for creating intermediate tensors
	Layer(int) Context
}

// Tensor is a node of a lazy graph (or a data tensor). Operations return
// new tensors; nothing runs until Context.Compute.
type Tensor interface {
	Dim(n int) int
	Stride(n int) int

	Shape() []int
	DType() DType
	Cast(ctx Context, dtype DType) Tensor

	Bytes() []byte
	Floats() []float32
	BackendGet() []float32

	FromBytes([]byte)
	FromFloats([]float32)
	FromInts([]int32)

	Add(ctx Context, t2 Tensor) Tensor
	Sub(ctx Context, t2 Tensor) Tensor
	Mul(ctx Context, t2 Tensor) Tensor
	Div(ctx Context, t2 Tensor) Tensor

	Mulmat(ctx Context, t2 Tensor) Tensor
	MulmatFullPrec(ctx Context, t2 Tensor) Tensor
	MulmatID(ctx Context, t2, ids Tensor) Tensor
	AddID(ctx Context, t2, ids Tensor) Tensor

	Softmax(ctx Context) Tensor
	L2Norm(ctx Context, eps float32) Tensor
	LayerNorm(ctx Context, weight, bias Tensor, eps float32) Tensor
	RMSNorm(ctx Context, weight Tensor, eps float32) Tensor
	Scale(ctx Context, s float64) Tensor
	SumRows(ctx Context) Tensor

	AvgPool2D(ctx Context, k, s int, p float32) Tensor
	Conv2D(ctx Context, weight Tensor, s0, s1, p0, p1, d0, d1 int) Tensor
	Conv3D(ctx Context, weight Tensor, c, s0, s1, s2, p0, p1, p2, d0, d1, d2 int) Tensor
	Conv1DDW(ctx Context, weight Tensor, s, p, d int) Tensor
	SSMConv(ctx Context, kernel Tensor) Tensor
	SSMScan(ctx Context, x, dt, A, B, C, ids Tensor) Tensor

	IM2Col(ctx Context, weight Tensor, s0, s1, p0, p1, d0, d1 int) Tensor

	Sin(ctx Context) Tensor
	Cos(ctx Context) Tensor
	Tanh(ctx Context) Tensor
	GELU(ctx Context, up ...Tensor) Tensor
	GELU_ERF(ctx Context) Tensor
	QuickGELU(ctx Context, up ...Tensor) Tensor
	SILU(ctx Context, up ...Tensor) Tensor
	RELU(ctx Context, up ...Tensor) Tensor
	Sigmoid(ctx Context) Tensor
	SigmoidOut(ctx Context) Tensor

	// AlphaLimitSILU is a variant of SILU that clamps the input to the range [-limit, limit]
	SILUAlphaLimit(ctx Context, up Tensor, alpha, limit float32) Tensor

	Reshape(ctx Context, shape ...int) Tensor
	View(ctx Context, offset int, shape ...int) Tensor
	Permute(ctx Context, shape ...int) Tensor
	Contiguous(ctx Context, shape ...int) Tensor

	Pad(ctx Context, shape ...int) Tensor
	// PadExt pads with independent left/right amounts per dimension.
	// Arguments: lp0, rp0, lp1, rp1, lp2, rp2, lp3, rp3 for dims 0-3.
	PadExt(ctx Context, lp0, rp0, lp1, rp1, lp2, rp2, lp3, rp3 int) Tensor

	Stack(ctx Context, dim int, s ...Tensor) Tensor

	// Repeat repeats the tensor n times along dimension dim
	Repeat(ctx Context, dim, n int) Tensor
	Concat(ctx Context, t2 Tensor, dim int) Tensor
	Rows(ctx Context, t2 Tensor) Tensor
	SetRows(ctx Context, src Tensor, idxs Tensor) Tensor
	SetInplace(ctx Context, src Tensor, nb1, nb2, nb3, offset int) Tensor
	Copy(ctx Context, t2 Tensor) Tensor
	Duplicate(ctx Context) Tensor

	Slice(ctx Context, dim, low, high, step int) Tensor
	Chunk(ctx Context, dim int, size int) []Tensor
	ChunkSections(ctx Context, dim int, sections ...int) []Tensor

	TopK(ctx Context, k int) Tensor
	Argsort(ctx Context) Tensor
	Mean(ctx Context) Tensor
	Variance(ctx Context) Tensor
	Stddev(ctx Context) Tensor
	Sqr(ctx Context) Tensor
	Sqrt(ctx Context) Tensor
	Exp(ctx Context) Tensor
	Neg(ctx Context) Tensor

	// Clamp clamps values to [min, max] range
	Clamp(ctx Context, min, max float32) Tensor

	// Softplus computes ln(1 + exp(x))
	Softplus(ctx Context) Tensor

	// CumSum computes cumulative sum along dimension 0
	CumSum(ctx Context) Tensor

	// Diag creates a diagonal matrix from a 1D tensor
	Diag(ctx Context) Tensor

	// Tri converts a matrix to triangular form (0=upper+diag, 1=upper, 2=lower+diag, 3=lower)
	Tri(ctx Context, triType int) Tensor

	// Fill fills a tensor with a constant value (in-place)
	Fill(ctx Context, value float32) Tensor

	// Repeat4D repeats tensor to match target shape
	Repeat4D(ctx Context, dim0, dim1, dim2, dim3 int) Tensor

	// SolveTri solves a triangular system Ax = B
	SolveTri(ctx Context, b Tensor, lower, left, unitDiag bool) Tensor

	Interpolate(ctx Context, dims [4]int, samplingMode SamplingMode) Tensor
}

// ScaledDotProductAttention implements a fused attention
// operation equivalent to following code on a tensor named
// query:
//
// query = query.Permute(ctx, 0, 2, 1, 3)
// key = key.Permute(ctx, 0, 2, 1, 3)
// value = value.Permute(ctx, 1, 2, 0, 3).Contiguous(ctx)
//
// kq := key.MulmatFullPrec(ctx, query)
//
// kq = kq.Scale(ctx, scale)
//
//	if mask != nil {
//		kq = kq.Add(ctx, mask)
//	}
//
// kq = kq.Softmax(ctx)
//
// kqv := value.Mulmat(ctx, kq)
// return kqv.Permute(ctx, 0, 2, 1, 3).Contiguous(ctx)
//
// cacheConfigApplied indicates whether the optimizations requested through CacheConfig have been performed
type ScaledDotProductAttention interface {
	ScaledDotProductAttention(ctx Context, key, value, mask, sinks Tensor, vmla Tensor, scale float64, cacheConfigApplied bool) Tensor
}

// NormLayers is a Context that can pin the norms of a layer to the
// layer's device (llama.cpp's rule for its layers' "norm" nodes): a model
// says which layer it builds, -1 after the last. Not part of Ollama's API.
type NormLayers interface {
	SetNormLayer(layer int)
}

// SoftCappedAttention is ScaledDotProductAttention with the scores
// soft-capped before the mask: softcap·tanh(scale·q·k / softcap) (Gemma 2's
// attention logit soft-capping; flash attention's logit_softcap). Not part
// of Ollama's API: ggml-rs's backend implements it.
type SoftCappedAttention interface {
	SoftCappedAttention(ctx Context, key, value, mask, sinks Tensor, scale, softcap float64) Tensor
}

type number interface {
	~int | ~int8 | ~int16 | ~int32 | ~int64 |
		~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64 |
		~float32 | ~float64 |
		~complex64 | ~complex128
}

// product multiplies its arguments (1 for none).
func product[T number](xs ...T) T {
	p := T(1)
	for _, x := range xs {
		p *= x
	}
	return p
}

// DumpOptions adjusts how Dump prints.
type DumpOptions func(*dumpOptions)

// DumpWithPrecision sets the number of decimal places to print. Applies to float32 and float64.
func DumpWithPrecision(n int) DumpOptions {
	return func(o *dumpOptions) { o.Precision = n }
}

// DumpWithThreshold sets the threshold for printing the entire tensor. If the number of elements
// is less than or equal to this value, the entire tensor will be printed. Otherwise, only the
// beginning and end of each dimension will be printed.
func DumpWithThreshold(n int) DumpOptions {
	return func(o *dumpOptions) { o.Threshold = n }
}

// DumpWithEdgeItems sets the number of elements to print at the beginning and end of each dimension.
func DumpWithEdgeItems(n int) DumpOptions {
	return func(o *dumpOptions) { o.EdgeItems = n }
}

type dumpOptions struct {
	Precision, Threshold, EdgeItems int
}

// Dump renders t as nested brackets, outermost dimension first (numpy
// style). A tensor that has not been computed is computed in ctx first;
// F16 and quantized tensors are converted to F32 through an Input tensor.
func Dump(ctx Context, t Tensor, opts ...DumpOptions) string {
	o := dumpOptions{Precision: 4, Threshold: 1000, EdgeItems: 3}
	for _, f := range opts {
		f(&o)
	}
	if product(t.Shape()...) <= o.Threshold {
		o.EdgeItems = math.MaxInt
	}

	formatFloat := func(f float32) string {
		return strconv.FormatFloat(float64(f), 'f', o.Precision, 32)
	}
	switch t.DType() {
	case DTypeF32:
		return dumpValues[float32](ctx, t, o.EdgeItems, formatFloat)
	case DTypeF16, DTypeQ80, DTypeQ40:
		f32 := t.Copy(ctx, ctx.Input().Empty(DTypeF32, t.Shape()...))
		return dumpValues[float32](ctx, f32, o.EdgeItems, formatFloat)
	case DTypeI32:
		return dumpValues[int32](ctx, t, o.EdgeItems, func(i int32) string {
			return strconv.FormatInt(int64(i), 10)
		})
	default:
		return "<unsupported>"
	}
}

func dumpValues[E number](ctx Context, t Tensor, edge int, format func(E) string) string {
	if t.Bytes() == nil {
		ctx.Forward(t).Compute(t)
	}

	values := make([]E, product(t.Shape()...))
	if err := binary.Read(bytes.NewReader(t.Bytes()), binary.LittleEndian, values); err != nil {
		panic(err)
	}

	// Outermost dimension first.
	dims := slices.Clone(t.Shape())
	slices.Reverse(dims)

	var sb strings.Builder
	// write prints the block of values starting at offset whose shape is
	// dims[depth:].
	var write func(depth, offset int)
	write = func(depth, offset int) {
		n := dims[depth]
		inner := product(dims[depth+1:]...)
		indent := strings.Repeat(" ", depth+1)
		newlines := strings.Repeat("\n", len(dims)-depth-1)
		sb.WriteString("[")
		for i := 0; i < n; i++ {
			if i >= edge && i < n-edge {
				// Elided middle: jump to the last `edge` entries.
				sb.WriteString("..., ")
				if depth < len(dims)-1 {
					sb.WriteString(newlines)
					sb.WriteString(indent)
				}
				i = n - edge - 1
				continue
			}
			last := i == n-1
			if depth < len(dims)-1 {
				write(depth+1, offset+i*inner)
				if !last {
					sb.WriteString(",")
					sb.WriteString(newlines)
					sb.WriteString(indent)
				}
				continue
			}
			text := format(values[offset+i])
			if text != "" && text[0] != '-' {
				sb.WriteString(" ")
			}
			sb.WriteString(text)
			if !last {
				sb.WriteString(", ")
			}
		}
		sb.WriteString("]")
	}
	write(0, 0)
	return sb.String()
}

// DType is a tensor element type.
type DType int

const (
	DTypeOther DType = iota
	DTypeF32
	DTypeF16
	DTypeQ80
	DTypeQ40
	DTypeI32
	DTypeMXFP4
)

// SamplingMode selects the interpolation of Tensor.Interpolate.
type SamplingMode int

const (
	SamplingModeNearest SamplingMode = iota
	SamplingModeBilinear
)

// RowWise is a context (with its siblings) whose graphs can compute each
// row of a batch as a one-row batch would, bit for bit: matrix products
// of several rows are built as one-row products wherever the batch could
// change a row's bits (float weights on the CPU, whose batches take
// llamafile's tiled kernels that sum in another order than the per-row dot
// products; weights on other devices), not where it cannot (quantized
// weights on an x86 CPU).
// Speculative decoding verifies drafts in this mode so that its output is
// plain decoding's token for token; attention does its part through the
// cache (kvcache.Ubatch.RowWise).
type RowWise interface {
	SetRowWise(on bool)
}
