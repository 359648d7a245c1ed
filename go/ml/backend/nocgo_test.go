package backend

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestBuildWithoutCgo: CGO_ENABLED=0 fails with one error that names
// what to do (nocgo.go), not with undefined symbols from every file.
func TestBuildWithoutCgo(t *testing.T) {
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(gobin); err != nil {
		if gobin, err = exec.LookPath("go"); err != nil {
			t.Fatal("no go command to build with")
		}
	}
	cmd := exec.Command(gobin, "build", "-o", os.DevNull, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatal("the package built without cgo")
	}
	var errs []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if !strings.HasPrefix(l, "#") {
			errs = append(errs, l)
		}
	}
	if len(errs) != 1 || !strings.Contains(errs[0], "needs_cgo__build_with_CGO_ENABLED_1") {
		t.Fatalf("want one error naming CGO_ENABLED=1, got:\n%s", out)
	}
}
