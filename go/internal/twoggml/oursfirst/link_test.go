package oursfirst_test

import (
	"testing"

	"github.com/ggml-rs/ggml-rs/go/internal/twoggml"
	"github.com/ggml-rs/ggml-rs/go/internal/twoggml/oursfirst"
)

func TestEachSideRunsItsOwnGgml(t *testing.T) { twoggml.Check(t, oursfirst.Sides) }
