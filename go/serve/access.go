package serve

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
)

// Who may use the server: where it listens (loopback unless the operator
// says otherwise) and, when an API key is set, a bearer token on every
// request.

// CheckListenAddr refuses an address (host:port) that listens beyond this
// machine, unless allowRemote: an empty host (":11434", every
// interface), an unspecified one (0.0.0.0, ::), any other address than a
// loopback one, and any host name but localhost (a name may resolve to
// any interface). The server speaks plain HTTP, so remote use belongs
// behind -api-key and a TLS proxy.
func CheckListenAddr(addr string, allowRemote bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("-addr %q: %v (host:port, e.g. 127.0.0.1:11434)", addr, err)
	}
	if allowRemote || isLoopbackHost(host) {
		return nil
	}
	where := host
	if host == "" {
		where = "every interface"
	}
	return fmt.Errorf("-addr %s listens beyond this machine (on %s): the server speaks plain HTTP, "+
		"and without -api-key anyone who reaches the port can use it; "+
		"pass -allow-remote (with -api-key, behind a TLS proxy) to serve other machines", addr, where)
}

// isLoopbackHost reports whether host is localhost or a loopback address.
func isLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	if i := strings.IndexByte(host, '%'); i >= 0 {
		host = host[:i] // an IPv6 zone
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// CheckListener refuses a listener that is not on a loopback address
// (localhost resolved to something else), unless allowRemote.
func CheckListener(ln net.Listener, allowRemote bool) error {
	if allowRemote {
		return nil
	}
	if a, ok := ln.Addr().(*net.TCPAddr); ok && !a.IP.IsLoopback() {
		return fmt.Errorf("the server would listen on %s, which is not a loopback address: pass -allow-remote to serve other machines", a)
	}
	return nil
}

// errUnauthorized answers a request without the API key.
var errUnauthorized = errors.New("unauthorized: this server needs an API key (send the header \"Authorization: Bearer KEY\")")

// authorized reports whether r carries the server's API key as a bearer
// token (every request does, when a key is set). The comparison takes
// the same time whatever the token (both sides hashed first, so that not
// even the key's length shows).
func (s *Server) authorized(r *http.Request) bool {
	if s.cfg.APIKey == "" {
		return true
	}
	h := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(token)))
	want := sha256.Sum256([]byte(s.cfg.APIKey))
	return subtle.ConstantTimeCompare(got[:], want[:]) == 1
}

// refuseUnauthorized answers 401 in the request's API's shape.
func refuseUnauthorized(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="ggml-rs"`)
	writeError(w, r, http.StatusUnauthorized, errUnauthorized)
}
