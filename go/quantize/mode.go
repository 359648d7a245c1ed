package quantize

import (
	"io/fs"
	"os"
	"strconv"
	"strings"
)

// outputMode is the permission the output gets: an existing output's own
// (the file is replaced, as llama-quantize rewrites it in place), else a
// new file's, 0666 less the process's umask, as open(2) would give it.
// The temporary file it is written through is created 0600.
func outputMode(out string) fs.FileMode {
	if st, err := os.Stat(out); err == nil && st.Mode().IsRegular() {
		return st.Mode().Perm()
	}
	return 0o666 &^ umask()
}

// umask reads the process's file mode creation mask from
// /proc/self/status (Linux 4.7 and later) without changing it, which
// syscall.Umask would do for every goroutine at once; 022 where that
// cannot be read.
func umask() fs.FileMode {
	b, err := os.ReadFile("/proc/self/status")
	if err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "Umask:"); ok {
				if m, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32); err == nil {
					return fs.FileMode(m) & 0o777
				}
			}
		}
	}
	return 0o022
}
