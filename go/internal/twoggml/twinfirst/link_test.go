package twinfirst_test

import (
	"testing"

	"ggmlrs/internal/twoggml"
	"ggmlrs/internal/twoggml/twinfirst"
)

func TestEachSideRunsItsOwnGgml(t *testing.T) { twoggml.Check(t, twinfirst.Sides) }
