package server

import (
	"context"
	"net/http"
	"slices"

	"github.com/danielgtaylor/huma/v2"

	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/store"
)

// What a client that shows the workspace to people needs beyond the records: who its key is,
// and every call that waits for someone, across threads.

// Session is what the request's key is: its workspace, user and role.
type Session struct {
	WorkspaceID   string        `json:"workspace_id"`
	WorkspaceName string        `json:"workspace_name,omitempty"`
	UserID        string        `json:"user_id,omitempty"`
	KeyID         string        `json:"key_id,omitempty" doc:"The key's id (never the key); absent on a server without keys."`
	Role          store.KeyRole `json:"role" doc:"viewer (reads), member (also calls, runs, decides) or admin (also manages the workspace, members and keys)."`
	// Toolsets tell a client what the key reaches before it asks for tools: a key bound to
	// toolsets sees and calls only their tools.
	Toolsets []string `json:"toolsets,omitempty" doc:"The toolsets the key is bound to: it may see and call only their tools, at every door. Absent when it is bound to none."`
}

type sessionOutput struct {
	Body *Session
}

// WaitingCall is a call a thread waits on, for an inbox.
type WaitingCall struct {
	ThreadID   string         `json:"thread_id"`
	ThreadName string         `json:"thread_name,omitempty"`
	Agent      string         `json:"agent,omitempty" doc:"The agent that has the thread."`
	Pending    *agent.Pending `json:"pending"`
}

type waitingInput struct {
	Limit  int    `query:"limit" minimum:"1" maximum:"100" default:"50" doc:"Threads per page, 1 to 100."`
	Cursor string `query:"cursor" maxLength:"1024" doc:"Where the page starts: the next_cursor of the page before; empty for the first."`
}

type waitingOutput struct {
	Body struct {
		Calls      []WaitingCall `json:"calls" doc:"Newest thread first: one call per waiting thread (the first of its step; the rest wait their turn)."`
		NextCursor string        `json:"next_cursor,omitempty" doc:"The cursor of the next page; absent on the last."`
	}
}

func (s *Server) registerConsoleAPI(api huma.API) {
	register(api, huma.Operation{OperationID: "get-session", Method: http.MethodGet, Path: "/v1/session",
		Summary: "What the request's key is: its workspace, user and role"},
		func(ctx context.Context, _ *struct{}) (*sessionOutput, error) {
			p, ok := PrincipalFrom(ctx)
			out := &Session{WorkspaceID: s.workspaceID(ctx), UserID: p.UserID, KeyID: p.KeyID, Role: p.Role,
				Toolsets: slices.Clone(p.Toolsets)} // the principal's are shared with the key's cached check
			if !ok || s.cfg.Auth == nil {
				out.Role = store.KeyRoleAdmin // a server without keys lets anyone do anything
			}
			if w, err := s.p.Store().Workspace(ctx, out.WorkspaceID); err == nil {
				out.WorkspaceName = w.Name
			}
			return &sessionOutput{Body: out}, nil
		})

	register(api, huma.Operation{OperationID: "list-waiting-calls", Method: http.MethodGet, Path: "/v1/pending",
		Summary: "Every call in the workspace that waits for a person's decision or a client's result, newest thread first"},
		func(ctx context.Context, in *waitingInput) (*waitingOutput, error) {
			calls, next, err := s.p.WaitingCalls(ctx, s.actor(ctx), in.Limit, in.Cursor)
			if err != nil {
				return nil, problem(err, "query")
			}
			out := &waitingOutput{}
			out.Body.Calls, out.Body.NextCursor = make([]WaitingCall, len(calls)), next
			for i, c := range calls {
				out.Body.Calls[i] = WaitingCall{ThreadID: c.Thread.ID, ThreadName: c.Thread.Name(), Agent: c.Agent, Pending: c.Pending}
			}
			return out, nil
		})
	s.registerServedTools(api)
}
