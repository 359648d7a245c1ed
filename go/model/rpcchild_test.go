package model_test

import (
	"strings"
	"testing"

	"github.com/ggml-rs/ggml-rs/go/internal/rpcserver"
)

// runWithRPCServer starts a ggml-rs RPC server with serverArgs and runs the
// test named test again in a child process whose only "GPU" is that server
// (GGML_RS_RPC_SERVERS is read once per process); childEnv marks the child,
// which does the work. It fails unless the child passes, and returns the
// server's output and the child's.
func runWithRPCServer(t *testing.T, test, childEnv string, serverArgs ...string) (server, child string) {
	t.Helper()
	server, child = rpcserver.RunChild(t, "^"+test+"$", childEnv, serverArgs...)
	if !strings.Contains(child, "--- PASS: "+test) {
		t.Fatalf("%s did not pass in the child:\n%s\nserver:\n%s", test, child, server)
	}
	return server, child
}
