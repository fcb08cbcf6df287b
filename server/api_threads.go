package server

import (
	"context"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/danielgtaylor/huma/v2"

	"github.com/quiverhq/quiver/store"
)

// registerThreadLists adds the endpoints that list a workspace's threads.
func (s *Server) registerThreadLists(api huma.API) {
	huma.Register(api, huma.Operation{OperationID: "list-threads", Method: http.MethodGet, Path: "/v1/threads",
		Summary: "The workspace's threads, newest first, a page at a time, optionally by agent, tag and status"}, s.listThreads)
}

// ---- the thread list

type threadsInput struct {
	Limit  int    `query:"limit" minimum:"1" maximum:"100" default:"20" doc:"Threads per page, 1 to 100."`
	Cursor string `query:"cursor" maxLength:"1024" doc:"Where the page starts: the next_cursor of the page before, listed with the same agent, tag and status; empty for the first. Opaque: a cursor altered, or given with other filters, is refused (400)."`
	Agent  string `query:"agent" maxLength:"128" doc:"Only the threads of this agent (its id)."`
	Tag    string `query:"tag" maxLength:"1024" doc:"Only the threads that have this tag (a tag is at most 1024 bytes)."`
	Status string `query:"status" enum:"idle,running,terminated" doc:"Only the threads in this status."`
}

type threadsOutput struct {
	Body struct {
		Threads    []*store.Thread `json:"threads"`
		NextCursor string          `json:"next_cursor,omitempty" doc:"The cursor of the next page; absent on the last."`
	}
}

func (s *Server) listThreads(ctx context.Context, in *threadsInput) (*threadsOutput, error) {
	// The store refuses the same values; checked here, the answer names the field at fault.
	for _, q := range []struct{ loc, v string }{{"query.agent", in.Agent}, {"query.tag", in.Tag}} {
		if !utf8.ValidString(q.v) || strings.IndexByte(q.v, 0) >= 0 {
			return nil, fieldError(http.StatusBadRequest, q.loc, "must be UTF-8 text without NUL")
		}
	}
	ws := s.workspaceID(ctx)
	f := store.ThreadFilter{AgentID: in.Agent, Tag: in.Tag, Status: store.ThreadStatus(in.Status), Limit: in.Limit, Cursor: in.Cursor}
	if err := store.CheckThreadCursor(ws, f); err != nil {
		return nil, fieldError(http.StatusBadRequest, "query.cursor",
			"not a cursor of this list: pass the next_cursor of the page before, with the same agent, tag and status")
	}
	threads, next, err := s.cfg.Store.Threads(ctx, ws, f)
	if err != nil {
		return nil, apiError(err, "the thread page")
	}
	out := &threadsOutput{}
	out.Body.Threads, out.Body.NextCursor = nonNil(threads), next
	return out, nil
}
