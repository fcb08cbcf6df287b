package server

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/quiverhq/quiver/store"
)

type threadsInput struct {
	Limit  int    `query:"limit" minimum:"1" maximum:"100" default:"20" doc:"Threads per page."`
	Cursor string `query:"cursor" maxLength:"512" doc:"Where the page starts: the next_cursor of the page before; empty for the first."`
}

type threadsOutput struct {
	Body struct {
		Threads    []*store.Thread `json:"threads"`
		NextCursor string          `json:"next_cursor,omitempty" doc:"The cursor of the next page; absent on the last."`
	}
}

// registerThreadLists adds the endpoints that list a workspace's threads.
func (s *Server) registerThreadLists(api huma.API) {
	huma.Register(api, huma.Operation{OperationID: "list-threads", Method: http.MethodGet, Path: "/v1/threads",
		Summary: "The workspace's threads, newest first, a page at a time"}, func(ctx context.Context, in *threadsInput) (*threadsOutput, error) {
		threads, next, err := s.cfg.Store.Threads(ctx, s.workspaceID(ctx), in.Limit, in.Cursor)
		if err != nil {
			return nil, apiError(err, "thread page")
		}
		out := &threadsOutput{}
		out.Body.Threads, out.Body.NextCursor = threads, next
		if out.Body.Threads == nil {
			out.Body.Threads = []*store.Thread{}
		}
		return out, nil
	})

}
