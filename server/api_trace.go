package server

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/quiverhq/quiver/platform"
)

// The trace of a thread's runs: its model requests, tool calls, approvals and sub-agents laid
// out in time, with their durations, tokens and errors (platform.Trace builds it from the
// thread's records). The console's thread page draws it.

func (s *Server) registerTrace(api huma.API) {
	register(api, huma.Operation{OperationID: "get-thread-trace", Method: http.MethodGet, Path: "/v1/threads/{id}/trace",
		Summary: "The trace of the thread's runs: model requests, tool calls, approvals and sub-agents in time",
		Description: "A timeline built from what the thread records: each model request (the assistant message it wrote, " +
			"with its model, input and output tokens and duration where they were recorded), each tool call (from the message " +
			"that asked for it to its result; an error result is an error span with its code), each person's decision on a call " +
			"that required one, and each sub-agent a call spawned (its own thread, whose trace is its own). Spans are ordered " +
			"by start; one with no end yet (a call without a result, an approval not given, a child still running) is pending. " +
			"The newest 2,000 messages are read; truncated says when older ones were left out. A thread of another workspace is a 404."},
		s.getTrace)
}

type traceOutput struct {
	Body *platform.Trace
}

// getTrace answers the trace of a thread of the key's workspace.
func (s *Server) getTrace(ctx context.Context, in *threadIDInput) (*traceOutput, error) {
	tr, err := s.p.Trace(ctx, s.actor(ctx), in.ID)
	if err != nil {
		return nil, problem(err, "query", "id")
	}
	return &traceOutput{Body: tr}, nil
}
