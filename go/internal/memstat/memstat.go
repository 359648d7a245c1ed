// Package memstat reads the memory figures the soak tests follow: the
// process's resident set and the bytes its C heap has handed out and not
// taken back (glibc's mallinfo2), with a least-squares slope to tell a
// curve that keeps rising from one that has levelled off.
//
// The C figure counts what ggml-rs and ggml hold (and any other C code of
// the process), not Go's heap. With glibc's per-thread caches on, chunks
// parked in a thread's tcache count as in use, so the figure creeps up for
// a while as the caches fill; a child run with
// GLIBC_TUNABLES=glibc.malloc.tcache_count=0 (Tunables) gets the exact
// count.
package memstat

/*
#include <stdlib.h> // defines __GLIBC__ under glibc
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
#include <malloc.h>
static int memstat_c_in_use(size_t *n) {
	struct mallinfo2 m = mallinfo2();
	*n = m.uordblks + m.hblkhd; // chunks in use in the arenas, mmapped chunks
	return 1;
}
static void memstat_trim(void) { malloc_trim(0); }
#else
static int memstat_c_in_use(size_t *n) { *n = 0; return 0; }
static void memstat_trim(void) {}
#endif
*/
import "C"

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
)

// Tunables is the glibc setting under which CInUse is exact: no
// per-thread caches (freed chunks go straight back to their arena) and one
// arena, so a leak is the only thing that makes it grow.
const Tunables = "glibc.malloc.tcache_count=0:glibc.malloc.arena_max=1"

// CInUse is the bytes the C heap has handed out and not taken back
// (mallinfo2's uordblks + hblkhd); ok is false without glibc 2.33 or
// later.
func CInUse() (n uint64, ok bool) {
	var v C.size_t
	if C.memstat_c_in_use(&v) == 0 {
		return 0, false
	}
	return uint64(v), true
}

// Trim hands the C heap's free pages back to the system (glibc's
// malloc_trim), so that the resident set that follows counts what is in
// use, not what the allocator keeps for later; a no-op without glibc.
func Trim() { C.memstat_trim() }

// RSS is the process's resident set in bytes (/proc/self/statm).
func RSS() (uint64, error) {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0, err
	}
	f := bytes.Fields(b)
	if len(f) < 2 {
		return 0, fmt.Errorf("/proc/self/statm: %q", b)
	}
	pages, err := strconv.ParseUint(string(f[1]), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("/proc/self/statm: %v", err)
	}
	return pages * uint64(os.Getpagesize()), nil
}

// Slope is the least-squares slope of ys against their indices: the
// growth per sample.
func Slope(ys []float64) float64 {
	n := float64(len(ys))
	if n < 2 {
		return 0
	}
	var sx, sy, sxx, sxy float64
	for i, y := range ys {
		x := float64(i)
		sx += x
		sy += y
		sxx += x * x
		sxy += x * y
	}
	return (n*sxy - sx*sy) / (n*sxx - sx*sx)
}
