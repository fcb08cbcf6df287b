package server

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/store"
)

// A sub-agent that subagent_create could not start for want of required variables waits,
// deferred, under a request id. These endpoints share the path of the thread's variables
// (OpenAPI allows one template per path): GET and POST take a request id where PUT and DELETE
// take a variable's name.

// VariablesRequest is a deferred sub-agent's request for variables.
type VariablesRequest struct {
	RequestID string `json:"request_id" doc:"The request: the deferred sub-agent's thread id."`
	ParentID  string `json:"parent_id" doc:"The thread that asked for the sub-agent."`
	Agent     string `json:"agent" doc:"The sub-agent's agent."`
	Name      string `json:"name,omitempty" doc:"The sub-agent's name."`
	// Missing are the variables to provide: names, types and descriptions, never values.
	Missing []RequestedVariable `json:"missing" doc:"The variables still to provide (none once started)."`
	Started bool                `json:"started" doc:"Whether the sub-agent has started."`
}

// RequestedVariable is a variable a deferred sub-agent waits for.
type RequestedVariable struct {
	Name        string `json:"name"`
	Secret      bool   `json:"secret" doc:"A secret: encrypted at rest, readable only by tools."`
	Description string `json:"description,omitempty"`
}

type variablesRequestOutput struct {
	Body *VariablesRequest
}

type variablesRequestInput struct {
	ID      string `path:"id" maxLength:"64" doc:"The parent thread's id (thr_...)."`
	Request string `path:"name" maxLength:"64" doc:"The request id subagent_env_required gave (for GET and POST; PUT and DELETE take a variable's name here)."`
}

type provideVariablesInput struct {
	ID      string `path:"id" maxLength:"64" doc:"The parent thread's id (thr_...)."`
	Request string `path:"name" maxLength:"64" doc:"The request id subagent_env_required gave."`
	Body    struct {
		Values map[string]string `json:"values" maxProperties:"100" doc:"The values, by variable name; each is stored on the sub-agent's thread as scoped (it flows down to its descendants), a secret encrypted."`
	}
}

// ThreadChild is an entry of a thread's children registry.
type ThreadChild struct {
	Ref       string             `json:"ref" doc:"The child thread's id: what subagent_message takes."`
	Name      string             `json:"name,omitempty" doc:"Its name (the tag name:<value>)."`
	Agent     string             `json:"agent,omitempty" doc:"The agent, or the prompt of a prompt tool's flow, it runs."`
	Status    store.ThreadStatus `json:"status" doc:"running, idle or terminated."`
	Blocking  bool               `json:"blocking" doc:"Whether the call that started it waited for its answer."`
	Resumable bool               `json:"resumable" doc:"Whether it keeps its thread to be messaged again."`
}

type threadChildrenOutput struct {
	Body struct {
		Children []ThreadChild `json:"children" doc:"Oldest first."`
	}
}

// VariablesRequestPath is the API's route of a deferred sub-agent's variables request: what
// a subagent_env_required result names (platform.Config.VariablesRequestURL).
func VariablesRequestPath(parentID, requestID string) string {
	return "/v1/threads/" + parentID + "/variables/" + requestID
}

func (s *Server) registerVariablesRequests(api huma.API) {
	register(api, huma.Operation{OperationID: "list-thread-children", Method: http.MethodGet, Path: "/v1/threads/{id}/children",
		Summary: "The thread's children registry: its sub-agents and prompt flows, oldest first"}, s.listChildren)
	const path = "/v1/threads/{id}/variables/{name}"
	register(api, huma.Operation{OperationID: "get-variables-request", Method: http.MethodGet, Path: path,
		Summary: "The variables a deferred sub-agent waits for (the request of a subagent_env_required result)"}, s.getVariablesRequest)
	register(api, huma.Operation{OperationID: "provide-variables", Method: http.MethodPost, Path: path,
		Summary: "Provide the variables a deferred sub-agent waits for; it starts at once", DefaultStatus: http.StatusAccepted}, s.provideVariables)
}

// listChildren answers the thread's children registry.
func (s *Server) listChildren(ctx context.Context, in *threadIDInput) (*threadChildrenOutput, error) {
	kids, err := s.p.Children(ctx, s.actor(ctx), in.ID)
	if err != nil {
		return nil, problem(err, "query")
	}
	out := &threadChildrenOutput{}
	out.Body.Children = make([]ThreadChild, len(kids))
	for i, k := range kids {
		out.Body.Children[i] = ThreadChild{Ref: k.ID, Name: k.Name(), Agent: agent.CurrentAgent(k), Status: k.Status,
			Blocking: k.Blocking, Resumable: k.Resumable}
	}
	return out, nil
}

// getVariablesRequest answers the variables a deferred sub-agent waits for.
func (s *Server) getVariablesRequest(ctx context.Context, in *variablesRequestInput) (*variablesRequestOutput, error) {
	d, err := s.p.VariablesRequest(ctx, s.actor(ctx), in.ID, in.Request)
	if err != nil {
		return nil, problem(err, "body", "name")
	}
	return &variablesRequestOutput{Body: variablesRequestOf(d)}, nil
}

// provideVariables stores the values given for a deferred sub-agent and starts it.
func (s *Server) provideVariables(ctx context.Context, in *provideVariablesInput) (*variablesRequestOutput, error) {
	d, err := s.p.ProvideVariables(ctx, s.actor(ctx), in.ID, in.Request, in.Body.Values)
	if err != nil {
		return nil, problem(err, "body", "name")
	}
	return &variablesRequestOutput{Body: variablesRequestOf(d)}, nil
}

func variablesRequestOf(d *agent.DeferredChild) *VariablesRequest {
	out := &VariablesRequest{RequestID: d.RequestID, ParentID: d.ParentID, Agent: d.Agent, Name: d.Name, Started: d.Started,
		Missing: make([]RequestedVariable, 0, len(d.Missing))}
	for _, v := range d.Missing {
		out.Missing = append(out.Missing, RequestedVariable{Name: v.Name, Secret: v.Type == quiver.VarSecret, Description: v.Description})
	}
	return out
}
