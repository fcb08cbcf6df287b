package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/quiverhq/quiver/mcp"
	"github.com/quiverhq/quiver/store"
)

// The probes a load balancer or an orchestrator asks: /healthz (alive: the process serves) and
// /readyz (ready: it takes new work).

// Health is the body of /healthz.
type Health struct {
	Status     string             `json:"status"`
	Tools      int                `json:"tools"`
	MCPServers []mcp.RemoteStatus `json:"mcp_servers,omitempty"`
	// Journal is there when calls are recorded through a journal (platform.OpenJournal).
	Journal *JournalHealth `json:"journal,omitempty"`
}

// JournalHealth says how the journal in front of the store keeps up.
type JournalHealth struct {
	// Pending records are in the journal and not yet in the store: a number that stays high
	// means the store does not keep up (or is down: the log says why).
	Pending int `json:"pending"`
	// Refused records were refused by the store and dropped (each was logged) since the start.
	Refused uint64 `json:"refused"`
	// Error is the store's last failure while the journal's writer retries it (the server's
	// status is then "degraded": calls are answered and recorded in the journal, and reach
	// the store once it is back).
	Error string `json:"error,omitempty"`
}

func (s *Server) health(w http.ResponseWriter, _ *http.Request) {
	h := Health{Status: "ok", Tools: len(s.own.disp.Tools())}
	h.MCPServers = s.remoteStatus()
	if j := s.p.Journal(); j != nil {
		h.Journal = &JournalHealth{Pending: j.Pending(), Refused: j.Refused()}
		if err := j.Failing(); err != nil {
			h.Status, h.Journal.Error = "degraded", err.Error()
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(h)
}

// Readiness is the body of /readyz.
type Readiness struct {
	Status string `json:"status" doc:"ready, draining (shutting down: send new work elsewhere) or unavailable (the store does not answer)."`
	Error  string `json:"error,omitempty"`
}

// readyTimeout bounds the store's answer to a readiness probe, and is how long it is kept.
const readyTimeout = 2 * time.Second

// ready answers whether the server takes new work: not while it drains, nor while its store
// does not answer (a node of a fleet that has lost its database serves nothing). The store's
// answer is kept for readyTimeout, so that probes, which need no key, cost the database one
// read a period however often they come.
func (s *Server) ready(w http.ResponseWriter, r *http.Request) {
	rd, status := Readiness{Status: "ready"}, http.StatusOK
	if s.draining.Load() {
		rd.Status, status = "draining", http.StatusServiceUnavailable
	} else if err := s.storeAnswers(r.Context()); err != nil {
		rd.Status, rd.Error, status = "unavailable", "the store does not answer; the server's log says why", http.StatusServiceUnavailable
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(rd)
}

// storeAnswers says whether the store answered its last readiness read, made again when that
// one is older than readyTimeout (one read at a time: concurrent probes wait for it).
func (s *Server) storeAnswers(ctx context.Context) error {
	s.readyMu.Lock()
	defer s.readyMu.Unlock()
	if time.Since(s.readyAt) < readyTimeout {
		return s.readyErr
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), readyTimeout)
	defer cancel()
	_, err := s.p.Store().Workspace(ctx, s.cfg.WorkspaceID)
	if errors.Is(err, store.ErrNotFound) {
		err = nil
	}
	if err != nil && s.readyErr == nil {
		s.logger.WarnContext(ctx, "server: the store does not answer the readiness probe", "err", err)
	}
	s.readyAt, s.readyErr = time.Now(), err
	return err
}
