package model_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"ggmlrs/internal/rpcserver"
)

// runWithRPCServer starts a ggml-rs RPC server with serverArgs and runs the
// test named test again in a child process whose only "GPU" is that server
// (GGML_RS_RPC_SERVERS is read once per process); childEnv marks the child,
// which does the work. It fails unless the child passes, and returns the
// server's output and the child's.
func runWithRPCServer(t *testing.T, test, childEnv string, serverArgs ...string) (server, child string) {
	t.Helper()
	endpoint, srvOut := rpcserver.Start(t, serverArgs...)
	cmd := exec.Command(os.Args[0], "-test.run", "^"+test+"$", "-test.v")
	cmd.Env = append(os.Environ(), "GGML_RS_RPC_SERVERS="+endpoint, childEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+test) {
		t.Fatalf("%s with an RPC device: %v\n%s\nserver:\n%s", test, err, out, srvOut())
	}
	return srvOut(), string(out)
}
