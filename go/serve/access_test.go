package serve

import (
	"net/http"
	"strings"
	"testing"
)

// TestCheckListenAddr: loopback addresses are served, every other
// address (every interface, a LAN address, a host name) only with
// -allow-remote.
func TestCheckListenAddr(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:11434", "127.0.0.2:0", "[::1]:11434", "localhost:8080", "LOCALHOST:1"} {
		if err := CheckListenAddr(addr, false); err != nil {
			t.Errorf("%s: %v", addr, err)
		}
	}
	for _, addr := range []string{"0.0.0.0:11434", ":11434", "[::]:11434", "192.168.1.5:11434", "example.org:80", "[fe80::1%eth0]:1"} {
		err := CheckListenAddr(addr, false)
		if err == nil || !strings.Contains(err.Error(), "-allow-remote") {
			t.Errorf("%s: %v, want a refusal naming -allow-remote", addr, err)
		}
		if err := CheckListenAddr(addr, true); err != nil {
			t.Errorf("%s with -allow-remote: %v", addr, err)
		}
	}
	if err := CheckListenAddr("11434", false); err == nil {
		t.Error("an address without a port is accepted")
	}
}

// TestAPIKey: with a key set, every request (loopback ones too) needs it
// as a bearer token: none, a wrong one, another scheme or a prefix of the
// key get a 401 in the API's error shape; the key gets through.
func TestAPIKey(t *testing.T) {
	const key = "s3cret-key-0123456789"
	_, url := newTestServer(t, Config{APIKey: key}, headerOnlyModel(t, "tiny"))
	get := func(path, auth string) (int, string) {
		req, _ := http.NewRequest("GET", url+path, nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		buf := make([]byte, 4096)
		for {
			n, err := resp.Body.Read(buf)
			b.Write(buf[:n])
			if err != nil {
				break
			}
		}
		if resp.StatusCode == 401 && resp.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("%s: a 401 without WWW-Authenticate", path)
		}
		return resp.StatusCode, b.String()
	}
	for _, auth := range []string{"", "Bearer", "Bearer wrong", "Bearer " + key[:len(key)-1], "Basic " + key, key, "Bearer " + key + "x"} {
		for _, path := range []string{"/api/tags", "/v1/models", "/", "/api/nothing"} {
			code, body := get(path, auth)
			if code != 401 || !strings.Contains(body, "API key") {
				t.Errorf("%s with %q: %d %s, want 401", path, auth, code, body)
			}
			if strings.HasPrefix(path, "/v1/") && !strings.Contains(body, `"error":{`) {
				t.Errorf("%s: OpenAI error shape expected, got %s", path, body)
			}
		}
	}
	for _, auth := range []string{"Bearer " + key, "bearer " + key} {
		if code, body := get("/api/tags", auth); code != 200 || !strings.Contains(body, "tiny") {
			t.Errorf("with the key (%q): %d %s", auth, code, body)
		}
		if code, body := get("/v1/models", auth); code != 200 || !strings.Contains(body, "tiny") {
			t.Errorf("/v1/models with the key: %d %s", code, body)
		}
	}
	// Without a key set, no header is needed.
	_, open := newTestServer(t, Config{}, headerOnlyModel(t, "tiny"))
	resp, err := http.Get(open + "/api/tags")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("no key: %v %v", resp, err)
	}
	resp.Body.Close()
}
