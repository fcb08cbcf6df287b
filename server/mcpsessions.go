package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/quiverhq/quiver/jobs"
	"github.com/quiverhq/quiver/mcp"
	"github.com/quiverhq/quiver/store"
)

// A server's MCP sessions are leases in its store (kind mcpSessionLease), so that every node
// of a fleet continues any session and the caps on sessions hold across the fleet: the
// server's total (MaxSessions), each workspace's share and each owner's. A session lives for
// the idle timeout after its last use on any node (see mcp.SessionStore). The thread a
// session's calls are recorded in is kept with it, so that every node records there.

// mcpSessionLease is the kind of the leases of MCP sessions.
const mcpSessionLease = "mcp-session"

// sessionLeases is a workspace's MCP sessions in the store.
type sessionLeases struct {
	leases      store.Leases
	workspaceID string
	ttl         time.Duration
	limits      store.LeaseLimits
}

var _ mcp.SessionStore = (*sessionLeases)(nil)

// sessionData is what a session's lease keeps.
type sessionData struct {
	Initialize json.RawMessage `json:"initialize,omitempty"`
	// ThreadID is the thread its calls are recorded in, once its first call made it.
	ThreadID string `json:"thread_id,omitempty"`
	UserID   string `json:"user_id,omitempty"`
}

// OpenSession stores a new session within the caps; see mcp.SessionStore.
func (s *sessionLeases) OpenSession(ctx context.Context, ms *mcp.SharedSession) error {
	data, err := json.Marshal(sessionData{Initialize: ms.Initialize})
	if err != nil {
		return err
	}
	l := &store.Lease{ID: ms.ID, WorkspaceID: s.workspaceID, Kind: mcpSessionLease, Owner: ms.Owner, Data: data}
	err = s.leases.AcquireLease(ctx, l, s.ttl, s.limits)
	var le *store.LeaseLimitError
	if errors.As(err, &le) {
		return &mcp.SessionLimitError{Cap: le.Cap, Open: le.Live}
	}
	return err
}

// ResumeSession returns the open session and keeps it for another idle timeout.
func (s *sessionLeases) ResumeSession(ctx context.Context, id string) (*mcp.SharedSession, error) {
	l, err := s.leases.RenewLease(ctx, s.workspaceID, id, s.ttl)
	if err != nil || l.Kind != mcpSessionLease {
		return nil, noSession(err)
	}
	var d sessionData
	if err := json.Unmarshal(l.Data, &d); err != nil {
		return nil, fmt.Errorf("reading session %s: %w", id, err)
	}
	return &mcp.SharedSession{ID: l.ID, Owner: l.Owner, Initialize: d.Initialize}, nil
}

// CloseSession ends the session.
func (s *sessionLeases) CloseSession(ctx context.Context, id string) error {
	return noSession(s.leases.ReleaseLease(ctx, s.workspaceID, id))
}

// noSession is err with a lease not found as mcp.ErrNoSession (a lease of another kind is
// none either).
func noSession(err error) error {
	if err == nil || errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("%w (%v)", mcp.ErrNoSession, err)
	}
	return err
}

// sessionThread returns the thread the session's calls are recorded in: the one stored with
// the session, or one made now and stored with it (when two nodes make one at once, the
// first stored is kept, and the other stays empty).
func (s *sessionLeases) sessionThread(ctx context.Context, id string, create func() (*store.Thread, error)) (*store.Thread, error) {
	l, err := s.leases.RenewLease(ctx, s.workspaceID, id, s.ttl)
	if err != nil {
		return nil, err
	}
	var d sessionData
	if err := json.Unmarshal(l.Data, &d); err != nil {
		return nil, err
	}
	if d.ThreadID != "" {
		return &store.Thread{ID: d.ThreadID, WorkspaceID: s.workspaceID, UserID: d.UserID}, nil
	}
	th, err := create()
	if err != nil {
		return nil, err
	}
	var kept sessionData
	_, err = s.leases.UpdateLease(ctx, s.workspaceID, id, func(l *store.Lease) error {
		if err := json.Unmarshal(l.Data, &kept); err != nil {
			return err
		}
		if kept.ThreadID == "" {
			kept.ThreadID, kept.UserID = th.ID, th.UserID
		}
		l.Data, err = json.Marshal(kept)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &store.Thread{ID: kept.ThreadID, WorkspaceID: s.workspaceID, UserID: kept.UserID}, nil
}

// answersRelay carries MCP clients' answers between the nodes of a fleet, as notes of the
// background jobs' relay (LISTEN/NOTIFY on PostgreSQL), on a topic per workspace.
type answersRelay struct {
	jobs  *jobs.Jobs
	topic string
}

var _ mcp.Relay = answersRelay{}

func (r answersRelay) Publish(ctx context.Context, sessionID string, body []byte) error {
	return r.jobs.Broadcast(ctx, r.topic, sessionID, body)
}

func (r answersRelay) Subscribe(fn func(sessionID string, body []byte)) (unsubscribe func()) {
	return r.jobs.Hear(r.topic, fn)
}
