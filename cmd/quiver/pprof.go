package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// startProfiling serves the Go runtime's profiles (net/http/pprof) at
// http://ADDR/debug/pprof/ when --pprof-addr asks for them, on a listener of their own, so
// that an operator can see where a busy server spends its time and memory (`go tool pprof
// http://ADDR/debug/pprof/profile`). Nothing authenticates a profile and a profile reveals
// code paths, the command line and, for a heap or goroutine dump, what the server is doing:
// only a loopback address is accepted, and the Host check against DNS rebinding applies as on
// every other door. The returned function stops serving.
func (a *app) startProfiling(f serveFlags) (func(), error) {
	addr := *f.pprofAddr
	if addr == "" {
		return func() {}, nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, usagef("--pprof-addr %q must be HOST:PORT, like 127.0.0.1:6060", addr)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, usagef("--pprof-addr %q: profiles are served on a loopback address only (127.0.0.1, ::1 or localhost): "+
			"nothing authenticates them; reach them from elsewhere through an SSH tunnel", addr)
	}
	guard, err := f.hostPolicy()
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("profiles: listening on %s: %w (choose another address with --pprof-addr)", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	// A CPU profile or a trace takes as long as its seconds parameter asks: no write timeout.
	hs := &http.Server{Handler: guard.Guard(mux), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	fmt.Fprintf(a.stderr, "quiver: pprof at http://%s/debug/pprof/\n", ln.Addr())
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(ctx)
	}, nil
}

// startWatching starts what the serving commands' flags ask to watch them by: the metrics
// exporter and the profiling endpoint. The function returned stops both.
func (a *app) startWatching(f serveFlags) (func(), error) {
	stopMetrics, err := a.startMetrics(f)
	if err != nil {
		return nil, err
	}
	stopProfiling, err := a.startProfiling(f)
	if err != nil {
		stopMetrics()
		return nil, err
	}
	return func() { stopProfiling(); stopMetrics() }, nil
}
