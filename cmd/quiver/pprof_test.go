package main

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

// quiver serve --pprof-addr serves the runtime's profiles on a loopback listener of their own
// (a heap profile with the memory statistics that bench/peers/cmd/serverbench reads), answers
// only to local names there too, and refuses an address other hosts could reach.
func TestServeProfiles(t *testing.T) {
	_, _, stderr := startServe(t, "--pprof-addr", "127.0.0.1:0")
	var base string
	for deadline := time.Now().Add(10 * time.Second); base == "" && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if m := regexp.MustCompile(`pprof at (http://\S+/debug/pprof/)`).FindStringSubmatch(stderr.String()); m != nil {
			base = m[1]
		}
	}
	if base == "" {
		t.Fatalf("serve did not say where its profiles are:\n%s", stderr.String())
	}
	get := func(url, host string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		if host != "" {
			req.Host = host
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, body := get(base+"heap?debug=1", ""); code != http.StatusOK || !strings.Contains(body, "# TotalAlloc = ") {
		t.Errorf("heap profile: %d %.200s", code, body)
	}
	if code, _ := get(base+"goroutine?debug=1", "evil.example.com"); code != http.StatusForbidden {
		t.Errorf("a profile asked for under a foreign Host name: %d, want 403", code)
	}

	for _, addr := range []string{"0.0.0.0:0", "192.0.2.1:6060", ":6060", "nonsense"} {
		var out strings.Builder
		code := run(t.Context(), []string{"serve", "--insecure-local", "--addr", "127.0.0.1:0", "--pprof-addr", addr}, strings.NewReader(""), io.Discard, &out)
		if code != exitUsage || !strings.Contains(out.String(), "--pprof-addr") {
			t.Errorf("--pprof-addr %s: exit %d, want %d with a word on the flag:\n%s", addr, code, exitUsage, out.String())
		}
	}
}
