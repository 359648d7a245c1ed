package twinfirst_test

import (
	"testing"

	"github.com/ggml-rs/ggml-rs/go/internal/twoggml"
	"github.com/ggml-rs/ggml-rs/go/internal/twoggml/twinfirst"
)

func TestEachSideRunsItsOwnGgml(t *testing.T) { twoggml.Check(t, twinfirst.Sides) }
