package oursfirst_test

import (
	"testing"

	"ggmlrs/internal/twoggml"
	"ggmlrs/internal/twoggml/oursfirst"
)

func TestEachSideRunsItsOwnGgml(t *testing.T) { twoggml.Check(t, oursfirst.Sides) }
