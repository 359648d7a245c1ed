package serve

import (
	"context"
	"runtime"
	"runtime/debug"
	"sync"
	"time"
)

// What a request costs before an engine takes it (rendering its chat
// template, tokenizing its prompt or its embedding inputs) is CPU and
// memory in proportion to its body: a few requests at a time do it, and
// after large bodies the heap's free memory goes back to the system.

// slots bounds work done at once: acquire waits for a free slot.
type slots chan struct{}

// newPrepSlots is as many slots as cores (at least 2).
func newPrepSlots() slots { return make(slots, max(2, runtime.GOMAXPROCS(0))) }

// acquire takes a slot, or fails when ctx ends first (the client has
// gone); call the function it returns to give the slot back.
func (s slots) acquire(ctx context.Context) (func(), error) {
	select {
	case s <- struct{}{}:
		return func() { <-s }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// bigBody is the body size after which the server gives memory back.
const bigBody = 1 << 20

// reclaimer gives the heap's free memory back to the system soon after a
// large request (at most once per delay): the garbage collector alone
// would keep it for minutes when no other allocation comes to start a
// collection.
type reclaimer struct {
	delay   time.Duration
	mu      sync.Mutex
	pending bool
}

// soon schedules the reclaim, unless one already is.
func (rc *reclaimer) soon() {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.pending {
		return
	}
	rc.pending = true
	time.AfterFunc(rc.delay, func() {
		rc.mu.Lock()
		rc.pending = false
		rc.mu.Unlock()
		debug.FreeOSMemory()
	})
}
