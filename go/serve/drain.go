package serve

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"time"
)

// What the server reads and drops of a body its handler left unread (a
// request refused for its size, for JSON nested too deep, for a bad API
// key): at most drainMax bytes, for at most drainTime. Closing the
// connection with the client's data unread makes the kernel reset it, and
// a client still sending its body then gets the reset, not the answer.
// Beyond these bounds the connection is closed anyway.
var (
	drainMax  int64 = 4 << 20
	drainTime       = 5 * time.Second
)

// bodyTracker is a request body that knows whether it was read to its end.
type bodyTracker struct {
	io.ReadCloser
	n      int64 // bytes read
	length int64 // the request's Content-Length (-1: unknown)
	eof    bool
}

func (b *bodyTracker) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n += int64(n)
	if err != nil {
		b.eof = true // the end, or a broken body: nothing more to drain
	}
	return n, err
}

// done reports whether nothing of the body is left to read.
func (b *bodyTracker) done() bool { return b.eof || b.length >= 0 && b.n >= b.length }

// trackBody wraps r's body to see what the handler leaves of it.
func trackBody(r *http.Request) *bodyTracker {
	if r.Body == nil || r.Body == http.NoBody {
		return nil
	}
	t := &bodyTracker{ReadCloser: r.Body, length: r.ContentLength}
	r.Body = t
	return t
}

// drainBody sends the response written so far, then reads and drops what
// is left of the request body (at most drainMax bytes, for drainTime).
func drainBody(w http.ResponseWriter, r *http.Request, b *bodyTracker) {
	if b == nil || b.done() {
		return
	}
	// A client that waits for "100 Continue" has sent no body: nothing to
	// drain, and reading would wait for it.
	if strings.EqualFold(r.Header.Get("Expect"), "100-continue") {
		return
	}
	rc := http.NewResponseController(w)
	rc.Flush()
	rc.SetReadDeadline(time.Now().Add(drainTime))
	_, err := io.CopyN(io.Discard, b, drainMax)
	if err == nil || errors.Is(err, io.EOF) {
		rc.SetReadDeadline(time.Time{})
	}
}
