package bench

import (
	"github.com/ggml-rs/ggml-rs/go/internal/rawggml"
	"github.com/ggml-rs/ggml-rs/go/ml"
	_ "github.com/ggml-rs/ggml-rs/go/ml/backend" // registers "ggml"
)

// apiSide is ggml-rs at the API level: ml.Tensor methods of the backend,
// reached through the ml interfaces as model code reaches them.
type apiSide struct {
	b          ml.Backend
	data       ml.Context // operands' family
	ctx        ml.Context // where ops build
	x, y, w, q ml.Tensor
	norm       ml.Tensor // [dModel]
}

func newAPISide() (*apiSide, error) {
	b, err := ml.NewBackend("", ml.BackendParams{AllocMemory: true, NumThreads: 1})
	if err != nil {
		return nil, err
	}
	s := &apiSide{b: b, data: b.NewContextSize(64)}
	in := s.data.Input()
	s.x = in.Zeros(ml.DTypeF32, dModel, seq)
	s.y = in.Zeros(ml.DTypeF32, dModel, seq)
	s.w = in.Zeros(ml.DTypeF32, dModel, dFF)
	s.q = in.Zeros(ml.DTypeF32, headD, heads, seq)
	s.norm = in.Zeros(ml.DTypeF32, dModel)
	s.reset()
	return s, nil
}

func (s *apiSide) reset() {
	if s.ctx != nil {
		s.ctx.Close()
	}
	s.ctx = s.b.NewContextSize(ctxCap)
}

func (s *apiSide) close() {
	s.ctx.Close()
	s.data.Close()
	s.b.Close()
}

func (s *apiSide) add(n int) {
	for i := 0; i < n; i++ {
		s.x.Add(s.ctx, s.y)
	}
}

func (s *apiSide) mulmat(n int) {
	for i := 0; i < n; i++ {
		s.w.Mulmat(s.ctx, s.x)
	}
}

func (s *apiSide) reshape(n int) {
	for i := 0; i < n; i++ {
		s.x.Reshape(s.ctx, headD, heads, seq)
	}
}

func (s *apiSide) permute(n int) {
	for i := 0; i < n; i++ {
		s.q.Permute(s.ctx, 0, 2, 1, 3)
	}
}

func (s *apiSide) reshapePermute(n int) {
	for i := 0; i < n; i++ {
		s.x.Reshape(s.ctx, headD, heads, seq).Permute(s.ctx, 0, 2, 1, 3)
	}
}

func (s *apiSide) rmsNorm(n int) {
	for i := 0; i < n; i++ {
		s.x.RMSNorm(s.ctx, s.norm, 1e-5)
	}
}

// rawAPISide is the Ollama-style anchor at the API level: rawggml.Tensor
// through the rawggml.T interface.
type rawAPISide struct {
	data       *rawggml.Context
	ctx        *rawggml.Context
	c          rawggml.Ctx
	x, y, w, q rawggml.T
	norm       rawggml.T
}

func newRawAPISide() *rawAPISide {
	s := &rawAPISide{data: rawggml.NewContext(64)}
	s.x = s.data.NewTensor(rawggml.TypeF32, dModel, seq)
	s.y = s.data.NewTensor(rawggml.TypeF32, dModel, seq)
	s.w = s.data.NewTensor(rawggml.TypeF32, dModel, dFF)
	s.q = s.data.NewTensor(rawggml.TypeF32, headD, heads, seq)
	s.norm = s.data.NewTensor(rawggml.TypeF32, dModel)
	s.reset()
	return s
}

func (s *rawAPISide) reset() {
	s.ctx.Close()
	s.ctx = rawggml.NewContext(ctxCap)
	s.c = s.ctx
}

func (s *rawAPISide) close() {
	s.ctx.Close()
	s.data.Close()
}

func (s *rawAPISide) add(n int) {
	for i := 0; i < n; i++ {
		s.x.Add(s.c, s.y)
	}
}

func (s *rawAPISide) mulmat(n int) {
	for i := 0; i < n; i++ {
		s.w.Mulmat(s.c, s.x)
	}
}

func (s *rawAPISide) reshape(n int) {
	for i := 0; i < n; i++ {
		s.x.Reshape(s.c, headD, heads, seq)
	}
}

func (s *rawAPISide) permute(n int) {
	for i := 0; i < n; i++ {
		s.q.Permute(s.c, 0, 2, 1, 3)
	}
}

func (s *rawAPISide) reshapePermute(n int) {
	for i := 0; i < n; i++ {
		s.x.Reshape(s.c, headD, heads, seq).Permute(s.c, 0, 2, 1, 3)
	}
}

func (s *rawAPISide) rmsNorm(n int) {
	for i := 0; i < n; i++ {
		s.x.RMSNorm(s.c, s.norm, 1e-5)
	}
}

// APICases are the API-level comparisons. close releases both sides.
func APICases() (cases []Case, close func(), err error) {
	o, err := newAPISide()
	if err != nil {
		return nil, nil, err
	}
	r := newRawAPISide()
	add := func(op string, ours, raw func(int), note string) {
		cases = append(cases, Case{Level: "API", Op: op, Ours: Side{ours, o.reset}, Raw: Side{raw, r.reset}, Note: note})
	}
	add("Add", o.add, r.add, "x.Add(ctx, y): one cgo call each")
	add("Mulmat", o.mulmat, r.mulmat, "w.Mulmat(ctx, x): one cgo call each")
	add("Reshape", o.reshape, r.reshape, "x.Reshape(ctx, 32, 8, 16): ours one call; Ollama's ggml_is_contiguous + ggml_reshape_3d")
	add("Permute", o.permute, r.permute, "q.Permute(ctx, 0, 2, 1, 3) of an operand whose shape ours has cached; Ollama's Shape() (ggml_n_dims) + ggml_permute")
	add("Reshape+Permute", o.reshapePermute, r.reshapePermute, "x.Reshape(...).Permute(...): a fresh tensor, so ours fetches its metadata once (3 cgo calls each side)")
	add("RMSNorm", o.rmsNorm, r.rmsNorm, "x.RMSNorm(ctx, w, eps): ours one fused call; Ollama's ggml_rms_norm + ggml_mul")
	return cases, func() { o.close(); r.close() }, nil
}
