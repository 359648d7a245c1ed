//go:build !linux

package testvocab

import "time"

// threadCPU is not available here: Scaling uses wall-clock time.
func threadCPU() (time.Duration, bool) { return 0, false }
