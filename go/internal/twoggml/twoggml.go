// Package twoggml tests that a Go program can link our static library
// together with another ggml and that each side gets its own: the
// program's ggml_* calls reach the other ggml (a build of the pinned
// sources marked "0.0.0-twin", scripts/twin-ggml.sh), the ggml_rs_ calls
// our private copy. Packages oursfirst and twinfirst link the two archives
// in opposite orders (their cgo LDFLAGS) and run Check.
package twoggml

import "testing"

// Twin is the other ggml's marker version.
const Twin = "0.0.0-twin"

// Sides is what one link order's program sees.
type Sides struct {
	TwinVersion, OursVersion func() string  // ggml_version(), ggml_rs_ggml_version()
	TwinGraphNodes           func() int     // nodes of a graph built by ggml_* calls (want 2)
	OursProductError         func() float64 // a product computed by ggml-rs, max error (-1: failed)
}

// Check fails t unless each side ran its own ggml, twice over.
func Check(t *testing.T, s Sides) {
	for round := 0; round < 2; round++ {
		if v := s.TwinVersion(); v != Twin {
			t.Fatalf("the program's ggml_version() is %q, not the twin's %q: ggml-rs's copy serves it", v, Twin)
		}
		if v := s.OursVersion(); v == Twin {
			t.Fatalf("ggml_rs_ggml_version() is the twin's %q: ggml-rs runs on the other ggml", v)
		}
		if n := s.TwinGraphNodes(); n != 2 {
			t.Errorf("the twin's graph has %d nodes, want 2", n)
		}
		if e := s.OursProductError(); e < 0 || e > 1e-4 {
			t.Errorf("ggml-rs's product: max error %g (-1: a call failed), want ≤ 1e-4", e)
		}
	}
	t.Logf("twin ggml %s beside ggml-rs's ggml %s", s.TwinVersion(), s.OursVersion())
}
