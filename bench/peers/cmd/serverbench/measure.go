//go:build linux && (amd64 || arm64)

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// result is one server's figures of one round.
type result struct {
	phases                          []phase
	idle, afterCalls, afterSessions mem
	// protocol is the MCP version the SDK's client, at its default, speaks with the server:
	// 2026-07-28 without sessions where the server answers server/discover, else a session's.
	protocol string
}

// concurrency is how many sessions (or API clients) the c16 phases run at once.
const concurrency = 16

// measurer measures one started server.
type measurer struct {
	ctx    context.Context
	t      target
	p      *proc
	c      *clients
	cfg    config
	res    result
	report func(phase)
}

// measure runs every phase against the started server p (see the command's documentation).
// profileDir, when not empty, receives the CPU profiles of its call-seq and call-c16 phases and
// its allocations profile after them.
func measure(ctx context.Context, t target, p *proc, cfg config, profileDir string, report func(phase)) (result, error) {
	m := &measurer{ctx: ctx, t: t, p: p, c: newClients(p.key, cfg.protocol), cfg: cfg, report: report}
	defer m.c.close()
	if err := m.settledMemory(&m.res.idle); err != nil {
		return result{}, err
	}
	if err := m.calls(profileDir); err != nil {
		return result{}, err
	}
	if err := m.settledMemory(&m.res.afterCalls); err != nil {
		return result{}, err
	}
	if err := m.lists(); err != nil {
		return result{}, err
	}
	if t.isQuiver() {
		if err := m.apiPhases(); err != nil {
			return result{}, err
		}
	}
	if err := m.sessions(); err != nil {
		return result{}, err
	}
	if err := m.settledMemory(&m.res.afterSessions); err != nil {
		return result{}, err
	}
	return m.res, nil
}

// settledMemory reads the server's memory into dst, once it has settled.
func (m *measurer) settledMemory(dst *mem) error {
	if err := sleep(m.ctx, m.cfg.settle); err != nil {
		return err
	}
	var err error
	*dst, err = readMem(m.p.pid)
	return err
}

// calls runs the call phases, after checking the server's tools, and saves the allocations
// profile after them when profileDir is set.
func (m *measurer) calls(profileDir string) error {
	if err := m.checkTools(); err != nil {
		return err
	}
	if err := m.callPhase("call-seq", 1, 50, profileDir); err != nil {
		return err
	}
	if err := m.callPhase("call-c16", concurrency, 2, profileDir); err != nil {
		return err
	}
	if profileDir == "" {
		return nil
	}
	allocs, err := fetch(m.ctx, m.p.pprofBase+"allocs")
	if err != nil {
		return fmt.Errorf("allocations profile: %w", err)
	}
	return os.WriteFile(filepath.Join(profileDir, m.t.label+"-allocs.pprof"), allocs, 0o644)
}

// lists runs the tools/list phases.
func (m *measurer) lists() error {
	list := func(ctx context.Context, cs *mcp.ClientSession) error {
		_, err := listAll(ctx, cs)
		return err
	}
	if err := m.sessionPhase("list-seq", 1, m.cfg.lists, 3, nil, list); err != nil {
		return err
	}
	return m.sessionPhase("list-c16", concurrency, m.cfg.lists, 1, nil, list)
}

// sessions runs the phase that opens and closes sessions one after the other.
func (m *measurer) sessions() error {
	ph, err := timed(m.ctx, m.p.pprofBase, "sessions", func() ([]time.Duration, time.Duration, error) {
		return runOps(m.ctx, 1, m.cfg.sessions, nil, func(ctx context.Context, _ int) error {
			cs, err := m.c.connect(ctx, m.p.mcpURL)
			if err != nil {
				return err
			}
			return m.c.closeAll([]*mcp.ClientSession{cs})
		})
	})
	if err != nil {
		return err
	}
	m.add(ph)
	return nil
}

func (m *measurer) add(ph phase) {
	m.res.phases = append(m.res.phases, ph)
	m.report(ph)
}

// checkTools checks with one tools/list that the server serves get_current_time and the
// filler tools.
func (m *measurer) checkTools() error {
	cs, err := m.c.connect(m.ctx, m.p.mcpURL)
	if err != nil {
		return err
	}
	if res := cs.InitializeResult(); res != nil {
		m.res.protocol = res.ProtocolVersion
	}
	names, err := listAll(m.ctx, cs)
	if cerr := m.c.closeAll([]*mcp.ClientSession{cs}); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("tools/list: %w", err)
	}
	return checkListed(m.t, names, m.cfg.tools)
}

// sessionPhase opens `workers` sessions, warms each with `warm` ops, then times n ops spread
// over them at once (and more, until more is closed, when it is not nil), and closes them.
func (m *measurer) sessionPhase(name string, workers, n, warm int, more <-chan struct{},
	op func(context.Context, *mcp.ClientSession) error) error {
	var sessions []*mcp.ClientSession
	defer func() { m.c.closeAll(sessions) }()
	for range workers {
		cs, err := m.c.connect(m.ctx, m.p.mcpURL)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		sessions = append(sessions, cs)
		for i := range warm {
			if err := op(m.ctx, cs); err != nil {
				return fmt.Errorf("%s: warm-up op %d: %w", name, i+1, err)
			}
		}
	}
	ph, err := timed(m.ctx, m.p.pprofBase, name, func() ([]time.Duration, time.Duration, error) {
		return runOps(m.ctx, workers, n, more, func(ctx context.Context, w int) error { return op(ctx, sessions[w]) })
	})
	if err != nil {
		return err
	}
	err = m.c.closeAll(sessions)
	sessions = nil
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	m.add(ph)
	return nil
}

// callPhase runs a phase of tools/call from `workers` sessions, each warmed with `warm` calls,
// while a CPU profile of the server is taken when profileDir is set: the calls go on until the
// profile is done.
func (m *measurer) callPhase(name string, workers, warm int, profileDir string) error {
	if profileDir == "" {
		return m.sessionPhase(name, workers, m.cfg.calls, warm, nil, callClock)
	}
	ctx, cancel := context.WithCancel(m.ctx)
	defer cancel()
	done := make(chan struct{})
	var (
		prof []byte
		perr error
	)
	go func() {
		defer close(done)
		prof, perr = fetch(ctx, m.p.pprofBase+"profile?seconds="+strconv.Itoa(m.cfg.profileSeconds))
	}()
	err := m.sessionPhase(name, workers, m.cfg.calls, warm, done, callClock)
	if err != nil {
		cancel()
		<-done
		return err
	}
	<-done
	if perr != nil {
		return fmt.Errorf("CPU profile: %w", perr)
	}
	return os.WriteFile(filepath.Join(profileDir, m.t.label+"-"+name+".pprof"), prof, 0o644)
}

// apiPhases calls get_current_time through quiver's API, one client then 16 at once, each on
// keep-alive connections.
func (m *measurer) apiPhases() error {
	url := strings.TrimSuffix(m.p.mcpURL, "/mcp") + "/v1/tools/" + toolName + "/call"
	call := func(ctx context.Context, _ int) error { return m.c.apiCall(ctx, url) }
	for _, workers := range []int{1, concurrency} {
		name := "api-seq"
		if workers > 1 {
			name = fmt.Sprintf("api-c%d", workers)
		}
		// Warm up: the connections, and what the first calls set up.
		if _, _, err := runOps(m.ctx, workers, max(50, 2*workers), nil, call); err != nil {
			return fmt.Errorf("%s: warm-up: %w", name, err)
		}
		ph, err := timed(m.ctx, m.p.pprofBase, name, func() ([]time.Duration, time.Duration, error) {
			return runOps(m.ctx, workers, m.cfg.calls, nil, call)
		})
		if err != nil {
			return err
		}
		m.add(ph)
	}
	return nil
}
