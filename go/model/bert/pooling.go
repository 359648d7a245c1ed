package bert

import "fmt"

// Pooling is llama.cpp's pooling type ({arch}.pooling_type).
type Pooling uint32

const (
	PoolingNone Pooling = 0
	PoolingMean Pooling = 1
	PoolingCLS  Pooling = 2
	PoolingLast Pooling = 3
)

func (p Pooling) String() string {
	switch p {
	case PoolingNone:
		return "none"
	case PoolingMean:
		return "mean"
	case PoolingCLS:
		return "cls"
	case PoolingLast:
		return "last"
	}
	return fmt.Sprintf("pooling(%d)", uint32(p))
}

// ParsePooling reads "mean", "cls", "last" or "none".
func ParsePooling(s string) (Pooling, error) {
	for _, p := range []Pooling{PoolingNone, PoolingMean, PoolingCLS, PoolingLast} {
		if s == p.String() {
			return p, nil
		}
	}
	return 0, fmt.Errorf("unknown pooling %q (mean, cls, last or none)", s)
}

// KeyNormalize is the metadata key (under the architecture) that says
// whether embeddings are L2-normalised after pooling. llama.cpp has no key
// for it (it normalises unless told otherwise, and so do we when the key is
// absent); the converter writes it from sentence-transformers' modules.json.
const KeyNormalize = "normalize_embeddings"
