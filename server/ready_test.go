package server_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/quiverhq/quiver/server"
	"github.com/quiverhq/quiver/store/memstore"
)

// A server asked to shut down first drains: for DrainDelay it still serves what it is sent,
// but /readyz answers 503 draining, so that a load balancer sends new work elsewhere; then it
// stops. Before that /readyz answers 200 ready, by any host name (a probe comes by address).
func TestReadinessAndDrain(t *testing.T) {
	srv, err := server.New(context.Background(), server.Config{Platform: newPlatform(t, memstore.New(), testRegistry(t)),
		Logger: slog.New(slog.DiscardHandler), DrainDelay: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()

	probe := func(path string) (int, server.Readiness) {
		t.Helper()
		req, _ := http.NewRequest("GET", base+path, nil)
		req.Host = "10.1.2.3:8080" // a kubelet's probe names the pod's address
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		var rd server.Readiness
		b, _ := io.ReadAll(resp.Body)
		_ = json.Unmarshal(b, &rd)
		return resp.StatusCode, rd
	}
	if code, rd := probe("/readyz"); code != http.StatusOK || rd.Status != "ready" {
		t.Fatalf("/readyz before the shutdown: %d %+v, want 200 ready", code, rd)
	}
	cancel()
	deadline := time.Now().Add(5 * time.Second)
	for {
		code, rd := probe("/readyz")
		if code == http.StatusServiceUnavailable && rd.Status == "draining" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz while draining: %d %+v, want 503 draining", code, rd)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if code, _ := probe("/healthz"); code != http.StatusOK {
		t.Errorf("/healthz while draining: %d, want 200: the server still serves", code)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the server did not stop after its drain")
	}
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Error("the server still answers after it stopped")
	}
}
