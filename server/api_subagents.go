package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/danielgtaylor/huma/v2"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/vars"
	"github.com/quiverhq/quiver/thread"
)

// A sub-agent that subagent_create could not start for want of required variables waits,
// deferred, under a request id (A7). These endpoints share the path of the thread's variables
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

// maxRequestValues bounds the values one POST provides.
const maxRequestValues = 100

// ThreadChild is an entry of a thread's children registry (A8).
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

// maxChildrenListed bounds the children registry one answer lists: a resumable sub-agent's
// cap is at most 1000 live instances per configuration, and children that ended stay listed.
const maxChildrenListed = 10000

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
	info, err := s.thread(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	kids, err := s.cfg.Store.Children(ctx, info.WorkspaceID, info.ID)
	if err != nil {
		return nil, apiError(err, "the children of thread "+info.ID)
	}
	if len(kids) > maxChildrenListed {
		kids = kids[:maxChildrenListed]
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
	parent, err := s.parentThread(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	d, err := s.p.Runner().Deferred(ctx, parent, in.Request)
	if err != nil {
		return nil, requestError(err, in.Request)
	}
	// Fix: the request's Missing is what subagent_create found missing; a value a POST
	// stored since (the 400 missing_variables of a partial POST) was still listed,
	// though Missing is "the variables still to provide".
	if d, err = s.outstanding(ctx, parent, d); err != nil {
		return nil, apiError(err, "variables request "+in.Request)
	}
	return &variablesRequestOutput{Body: variablesRequestOf(d)}, nil
}

// provideVariables stores the values given for a deferred sub-agent and starts it.
func (s *Server) provideVariables(ctx context.Context, in *provideVariablesInput) (*variablesRequestOutput, error) {
	if _, err := s.member(ctx, "read threads but not provide variables"); err != nil {
		return nil, err
	}
	parent, err := s.parentThread(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	d, err := s.p.Runner().Deferred(ctx, parent, in.Request)
	if err != nil {
		return nil, requestError(err, in.Request)
	}
	if d.Started {
		// Started already; if a process died before its run was queued, this queues it.
		if _, err := s.p.Runner().StartDeferred(ctx, parent, in.Request); err != nil {
			return nil, apiError(err, "sub-agent "+in.Request)
		}
		return nil, problemf(http.StatusConflict, CodeConflict, fmt.Sprintf("sub-agent %s has started already", d.RequestID))
	}
	if err := s.storeRequested(ctx, parent, d, in.Body.Values); err != nil {
		return nil, err
	}
	missing, err := s.p.Runner().StartDeferred(ctx, parent, in.Request)
	if err != nil {
		return nil, apiError(err, "starting sub-agent "+in.Request)
	}
	if len(missing) > 0 {
		names := make([]string, len(missing))
		for i, v := range missing {
			names[i] = v.Name
		}
		return nil, problemf(http.StatusBadRequest, CodeMissingVariables, "the values given are stored, but the sub-agent still needs "+
			strings.Join(names, ", "), &ProblemField{Location: "body.values", Message: "provide " + strings.Join(names, ", ")})
	}
	d, err = s.p.Runner().Deferred(ctx, parent, in.Request)
	if err != nil {
		return nil, apiError(err, "sub-agent "+in.Request)
	}
	return &variablesRequestOutput{Body: variablesRequestOf(d)}, nil
}

// outstanding narrows a deferred child's request to the variables that do not resolve on its
// thread yet, as StartDeferred checks them; a POST still takes any name of the request.
func (s *Server) outstanding(ctx context.Context, parent *thread.Thread, d *agent.DeferredChild) (*agent.DeferredChild, error) {
	r := s.p.Runner()
	a, ok := r.Catalog.Lookup(d.Agent)
	if d.Started || len(d.Missing) == 0 || r.Resolver == nil || !ok {
		return d, nil
	}
	child, err := parent.Child(ctx, d.RequestID)
	if err != nil {
		return nil, err
	}
	_, err = quiver.ResolveVariables(vars.WithPrompt(ctx, a.Prompt.Name), r.Resolver, child.Scope(), d.Missing)
	var missing *quiver.MissingVariablesError
	out := *d
	switch {
	case errors.As(err, &missing):
		out.Missing = missing.Missing
	case err != nil:
		return nil, err
	default:
		out.Missing = nil
	}
	return &out, nil
}

// parentThread opens the key's workspace's thread id (404 for any other).
func (s *Server) parentThread(ctx context.Context, id string) (*thread.Thread, error) {
	if s.p.Jobs() == nil {
		return nil, problemf(http.StatusServiceUnavailable, CodeUnavailable, "this server runs no agents")
	}
	info, err := s.thread(ctx, id)
	if err != nil {
		return nil, err
	}
	return thread.Open(ctx, s.p.Store(), info.WorkspaceID, info.ID)
}

func requestError(err error, request string) error {
	if errors.Is(err, agent.ErrNotDeferred) {
		return problemf(http.StatusNotFound, CodeNotFound, "no variables request "+request+" on this thread",
			&ProblemField{Location: "path.name", Message: "a request id a subagent_env_required result gave"})
	}
	return apiError(err, "variables request "+request)
}

// storeRequested stores the values given for a deferred child's missing variables on the
// child's thread, as scoped values, secrets sealed; a name the request does not ask for is
// refused before anything is stored.
func (s *Server) storeRequested(ctx context.Context, parent *thread.Thread, d *agent.DeferredChild, values map[string]string) error {
	if len(values) == 0 || len(values) > maxRequestValues {
		return fieldError(http.StatusBadRequest, "body.values", fmt.Sprintf("give 1 to %d values, by name", maxRequestValues))
	}
	r := &vars.Resolver{Threads: s.cfg.Store, Values: s.cfg.Store, Keys: s.secretKeys()}
	names := make([]string, 0, len(values))
	for n := range values {
		names = append(names, n)
	}
	slices.Sort(names)
	out := make([]vars.Value, 0, len(values))
	for _, n := range names {
		i := slices.IndexFunc(d.Missing, func(v quiver.Variable) bool { return v.Name == n })
		if i < 0 {
			return fieldError(http.StatusBadRequest, "body.values."+n, "not a variable this request asks for: "+strings.Join(requestedNames(d), ", "))
		}
		secret := d.Missing[i].Type == quiver.VarSecret
		if secret && r.Keys == nil {
			return problemf(http.StatusServiceUnavailable, CodeUnavailable, "this server has no key to encrypt secrets with; nothing was stored")
		}
		out = append(out, vars.Value{Name: n, Value: values[n], Secret: secret, Scoped: true})
	}
	if err := r.Set(ctx, parent.WorkspaceID(), quiver.LayerThread, d.RequestID, out...); err != nil {
		if errors.Is(err, store.ErrInvalid) || errors.Is(err, store.ErrTooLarge) {
			return problemf(http.StatusBadRequest, CodeInvalidRequest, err.Error(), &ProblemField{Location: "body.values", Message: "text values within the size limit"})
		}
		return apiError(err, "the variables of sub-agent "+d.RequestID)
	}
	return nil
}

func requestedNames(d *agent.DeferredChild) []string {
	out := make([]string, len(d.Missing))
	for i, v := range d.Missing {
		out[i] = v.Name
	}
	return out
}

func variablesRequestOf(d *agent.DeferredChild) *VariablesRequest {
	out := &VariablesRequest{RequestID: d.RequestID, ParentID: d.ParentID, Agent: d.Agent, Name: d.Name, Started: d.Started,
		Missing: make([]RequestedVariable, 0, len(d.Missing))}
	for _, v := range d.Missing {
		out.Missing = append(out.Missing, RequestedVariable{Name: v.Name, Secret: v.Type == quiver.VarSecret, Description: v.Description})
	}
	return out
}
