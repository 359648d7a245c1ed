package llama

import (
	"errors"
	"fmt"

	"github.com/ggml-rs/ggml-rs/go/gguf"
	"github.com/ggml-rs/ggml-rs/go/ml"
	"github.com/ggml-rs/ggml-rs/go/ml/backend"
)

// ErrNoLlamaEngine is what the llama.cpp engine's constructors return.
var ErrNoLlamaEngine = errors.New("the llama.cpp engine is not part of ggml-rs: " +
	"this model needs Ollama's Go engine (set OLLAMA_NEW_ENGINE=1; architectures it does not implement cannot run)")

// BackendInit initialises nothing: ggml-rs starts its backends on first use.
func BackendInit() {}

// Devices is a GPU as the llama.cpp engine numbers it.
type Devices struct {
	ml.DeviceID
	LlamaID uint64
}

// EnumerateGPUs lists the GPUs (discrete and integrated) ggml-rs sees, in
// its device order.
func EnumerateGPUs() []Devices {
	var out []Devices
	for _, d := range backend.Devices() {
		if d.Type == backend.DeviceGPU || d.Type == backend.DeviceIntegratedGPU {
			out = append(out, Devices{DeviceID: ml.DeviceID{ID: d.ID, Library: d.Library}, LlamaID: uint64(d.Index)})
		}
	}
	return out
}

// GetModelArch is a GGUF file's general.architecture.
func GetModelArch(modelPath string) (string, error) {
	f, err := gguf.Open(modelPath)
	if err != nil {
		return "", fmt.Errorf("unable to load model file: %w", err)
	}
	v, ok := f.Get("general.architecture")
	arch, _ := v.(string)
	if !ok || arch == "" {
		return "", errors.New("unknown model architecture")
	}
	return arch, nil
}

// ModelParams are the llama.cpp engine's model options.
type ModelParams struct {
	Devices      []uint64
	NumGpuLayers int
	MainGpu      int
	UseMmap      bool
	TensorSplit  []float32
	Progress     func(float32)
	VocabOnly    bool
}

// Model is a llama.cpp model; none can be loaded.
type Model struct{}

// LoadModelFromFile returns ErrNoLlamaEngine.
func LoadModelFromFile(modelPath string, params ModelParams) (*Model, error) {
	return nil, fmt.Errorf("%s: %w", modelPath, ErrNoLlamaEngine)
}

// FreeModel does nothing.
func FreeModel(model *Model) {}

func (m *Model) NumVocab() int                 { return 0 }
func (m *Model) TokenIsEog(token int) bool     { return false }
func (m *Model) AddBOSToken() bool             { return false }
func (m *Model) NEmbd() int                    { return 0 }
func (m *Model) TokenToPiece(token int) string { return "" }
func (m *Model) Vocab() *Vocab                 { return nil }
func (m *Model) Tokenize(text string, addSpecial, parseSpecial bool) ([]int, error) {
	return nil, ErrNoLlamaEngine
}
func (m *Model) ApplyLoraFromFile(context *Context, loraPath string, scale float32, threads int) error {
	return ErrNoLlamaEngine
}

// Vocab is a llama.cpp vocabulary (opaque).
type Vocab struct{}

// ContextParams are the llama.cpp engine's context options.
type ContextParams struct {
	NumCtx, BatchSize, NumSeqMax, Threads int
	FlashAttention                        ml.FlashAttentionType
	KvCacheType                           string
}

// NewContextParams records the options.
func NewContextParams(numCtx int, batchSize int, numSeqMax int, threads int, flashAttention ml.FlashAttentionType, kvCacheType string) ContextParams {
	return ContextParams{numCtx, batchSize, numSeqMax, threads, flashAttention, kvCacheType}
}

// Context is a llama.cpp context; none can be made.
type Context struct{}

// NewContextWithModel returns ErrNoLlamaEngine.
func NewContextWithModel(model *Model, params ContextParams) (*Context, error) {
	return nil, ErrNoLlamaEngine
}

func (c *Context) Decode(batch *Batch) error                               { return ErrNoLlamaEngine }
func (c *Context) Model() *Model                                           { return nil }
func (c *Context) KvCacheSeqAdd(seqId int, p0 int, p1 int, delta int)      {}
func (c *Context) KvCacheSeqRm(seqId int, p0 int, p1 int) bool             { return false }
func (c *Context) KvCacheSeqCp(srcSeqId int, dstSeqId int, p0 int, p1 int) {}
func (c *Context) KvCacheClear()                                           {}
func (c *Context) KvCacheCanShift() bool                                   { return false }
func (c *Context) GetEmbeddingsSeq(seqId int) []float32                    { return nil }
func (c *Context) GetEmbeddingsIth(i int) []float32                        { return nil }
func (c *Context) GetLogitsIth(i int) []float32                            { return nil }
func (c *Context) Synchronize()                                            {}

// Batch is a llama.cpp batch; none can be made.
type Batch struct{}

// NewBatch returns ErrNoLlamaEngine.
func NewBatch(batchSize int, maxSeq int, embedSize int) (*Batch, error) {
	return nil, ErrNoLlamaEngine
}

func (b *Batch) Size() int                                                           { return 0 }
func (b *Batch) NumTokens() int                                                      { return 0 }
func (b *Batch) IsEmbedding() bool                                                   { return false }
func (b *Batch) Add(token int, embed []float32, pos int, logits bool, seqIds ...int) {}
func (b *Batch) Clear()                                                              {}
func (b *Batch) Free()                                                               {}

// MtmdContext is llama.cpp's multimodal context; none can be made.
type MtmdContext struct{}

// MtmdChunk is a piece of multimodal input: an embedding or tokens.
type MtmdChunk struct {
	Embed  []float32
	Tokens []int
}

// NewMtmdContext returns ErrNoLlamaEngine.
func NewMtmdContext(llamaContext *Context, modelPath string) (*MtmdContext, error) {
	return nil, ErrNoLlamaEngine
}

func (c *MtmdContext) Free() {}
func (c *MtmdContext) MultimodalTokenize(llamaContext *Context, data []byte) ([]MtmdChunk, error) {
	return nil, ErrNoLlamaEngine
}

// SamplingParams are llama.cpp's common sampler's options.
type SamplingParams struct {
	TopK           int
	TopP           float32
	MinP           float32
	TypicalP       float32
	Temp           float32
	RepeatLastN    int
	PenaltyRepeat  float32
	PenaltyFreq    float32
	PenaltyPresent float32
	PenalizeNl     bool
	Seed           uint32
	Grammar        string
}

// SamplingContext is llama.cpp's common sampler; none can be made.
type SamplingContext struct{}

// NewSamplingContext returns ErrNoLlamaEngine.
func NewSamplingContext(model *Model, params SamplingParams) (*SamplingContext, error) {
	return nil, ErrNoLlamaEngine
}

func (s *SamplingContext) Reset()                                    {}
func (s *SamplingContext) Sample(llamaContext *Context, idx int) int { return -1 }
func (s *SamplingContext) Accept(id int, applyGrammar bool)          {}
