package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/internal/ids"
	"github.com/quiverhq/quiver/mcp"
	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/schema"
	"github.com/quiverhq/quiver/store"
)

// The /v1 API: JSON over HTTP, described by the OpenAPI 3.1 document at /v1/openapi.json, which
// huma generates from the Go types of the api_*.go files, one file per resource. Errors are
// RFC 9457 problems (problem.go). Handlers translate HTTP to the platform's operations and its
// workspaces' dispatchers and hold no rules of their own; this file registers every resource,
// and has the tools the workspace may call, calling one, reading threads and starting runs.

// anyJSONSchema stands for schema.Schema in the OpenAPI document: any JSON Schema, an object
// or a boolean (draft 2020-12).
type anyJSONSchema struct{}

// Schema describes any JSON Schema.
func (anyJSONSchema) Schema(huma.Registry) *huma.Schema {
	return &huma.Schema{
		Description: "A JSON Schema (draft 2020-12): an object, or true (anything) or false (nothing).",
		OneOf:       []*huma.Schema{{Type: huma.TypeObject, AdditionalProperties: true}, {Type: huma.TypeBoolean}},
	}
}

// apiTool is a tool as the API lists it.
type apiTool struct {
	Name         string           `json:"name"`
	Description  string           `json:"description"`
	InputSchema  *schema.Schema   `json:"input_schema,omitempty"`
	OutputSchema *schema.Schema   `json:"output_schema,omitempty"`
	Examples     []quiver.Example `json:"examples,omitempty" doc:"Example calls: arguments and, optionally, the result they give."`

	Annotations *quiver.Annotations `json:"annotations,omitempty" doc:"The tool's MCP annotations as it declares them (an imported tool: as its remote server does), in MCP's spelling: title and the hints readOnlyHint, destructiveHint, idempotentHint, openWorldHint, each absent when the tool says nothing (which differs from false). Absent: none declared. Over MCP a tool that requires confirmation and declares neither destructiveHint nor readOnlyHint is also served destructiveHint true."`
}

type toolsOutput struct {
	Body struct {
		Tools   []apiTool   `json:"tools"`
		Remotes []apiRemote `json:"remotes,omitempty" doc:"The remote MCP servers whose tools the server imports, connected or not: one that is not has none of its tools listed, and says why."`
	}
}

// apiRemote is a remote MCP server as the served tools' listing reports it.
type apiRemote struct {
	Name        string    `json:"name" doc:"The server's name: its tools are named NAME.tool."`
	Connected   bool      `json:"connected"`
	Tools       int       `json:"tools" doc:"How many of its tools are imported."`
	LastError   string    `json:"last_error,omitempty" doc:"Why it is not connected: the last connection attempt's failure, or how the connection was lost."`
	LastAttempt time.Time `json:"last_attempt,omitzero" doc:"When that happened."`
}

type callInput struct {
	Name string `path:"name" minLength:"1" maxLength:"512" doc:"The tool's name, as GET /v1/tools lists it, URL-escaped (a name may hold spaces, /, % or ?: get_weather, look%20up%3A%20weather%3F)."`
	Body struct {
		Args     json.RawMessage `json:"args,omitempty" doc:"The arguments: a JSON object, validated against the tool's input schema."`
		ThreadID string          `json:"thread_id,omitempty" maxLength:"64" doc:"The thread to record the call in; a new thread when empty."`
	}
}

type callOutput struct {
	Body struct {
		ThreadID string         `json:"thread_id" doc:"The thread the call is recorded in."`
		Result   *quiver.Result `json:"result"`
	}
}

type threadInput struct {
	ID string `path:"id" maxLength:"64"`
}

type threadOutput struct {
	Body *threadView
}

// threadView is a thread with its state: what calls wrote with _outputPath, how its last run
// ended, and what it waits on.
type threadView struct {
	store.Thread
	// Status stands in for the stored one, which says only whether a run is going on: a
	// thread whose run paused on a call reads "waiting", one whose last run failed "failed",
	// not "idle".
	Status    string                     `json:"status" enum:"idle,running,terminated,waiting,failed" doc:"idle, running or terminated; waiting when its last run paused on a call: a person's decision (POST .../decisions) or a client tool's result (POST .../results), which pending names until it is in; failed when its last run could not start or go on, which run says (reason, error) until a later run ends otherwise."`
	Run       *agent.Outcome             `json:"run,omitempty" doc:"How the thread's last run ended: finished, paused, or failed (reason and error say why)."`
	Pending   *agent.Pending             `json:"pending,omitempty" doc:"The call the thread waits on, when its status is waiting: the call, and why it waits."`
	Data      json.RawMessage            `json:"data" doc:"The thread's state object: what calls wrote into it with _outputPath (the runtime's own record of the run is state)."`
	Instances map[string]json.RawMessage `json:"instances,omitempty" doc:"The state object of each of the thread's instances (calls naming _instance read and write it), by name."`
}

type messagesInput struct {
	ID     string `path:"id" maxLength:"64"`
	Limit  int    `query:"limit" minimum:"1" maximum:"1000" default:"100" doc:"Messages per page."`
	Before int64  `query:"before" minimum:"0" doc:"Only messages before this sequence number; 0 for the newest."`
}

type messagesOutput struct {
	Body struct {
		Messages []*store.Message `json:"messages"`
	}
}

// OpenAPI returns the /v1 API's OpenAPI 3.1 document, as a server serves it at
// /v1/openapi.json: what CI checks with an independent validator.
func OpenAPI() ([]byte, error) {
	// A server with runs: its handlers are not called, only described.
	_, api := (&Server{describeRuns: true}).apiHandler()
	return json.MarshalIndent(api.OpenAPI(), "", "  ")
}

// apiHandler builds the /v1 API. Its handlers use s only when they answer a request.
func (s *Server) apiHandler() (http.Handler, huma.API) {
	mux := http.NewServeMux()
	api := newAPI(mux)
	s.registerCalls(api)
	s.registerThreadLists(api)
	s.registerEntities(api)
	s.registerEntitlements(api)
	s.registerLimits(api)
	s.registerConnections(api)
	s.registerUsage(api)
	s.registerThreadReads(api)
	s.registerRunEvents(api)
	if s.runsOn() {
		s.registerRuns(api)
	}
	return mux, api
}

// newAPI is the /v1 API on mux, described by its OpenAPI document.
func newAPI(mux *http.ServeMux) huma.API {
	cfg := huma.DefaultConfig("Quiver", quiver.Version)
	cfg.OpenAPIPath = "/v1/openapi"
	cfg.SchemasPath = "/v1/schemas"
	cfg.DocsPath = ""     // the console serves people; the document serves tools
	cfg.CreateHooks = nil // no $schema links added to every body
	// Every operation needs an API key, sent as a bearer token; the document itself does not
	// (it holds no tenant's data), so that a client generator can read it from the server.
	cfg.Components.SecuritySchemes = map[string]*huma.SecurityScheme{
		"apiKey": {Type: "http", Scheme: "bearer", BearerFormat: "qvk_...",
			Description: "An API key (quiver keys create, POST /v1/keys) as Authorization: Bearer qvk_... " +
				"A server started with --insecure-local asks for none."},
	}
	cfg.Security = []map[string][]string{{"apiKey": {}}}
	api := humago.New(mux, cfg)
	api.UseMiddleware(traceRequests, strictBodies(api))
	// A JSON Schema inside an answer (a tool's input and output schemas) is any JSON Schema:
	// described as such, not as the Go struct that holds it (whose additionalProperties admits
	// only an object, where a real schema says false, and breaks generated clients).
	api.OpenAPI().Components.Schemas.RegisterTypeAlias(reflect.TypeFor[schema.Schema](), reflect.TypeFor[anyJSONSchema]())

	return api
}

// registerCalls adds the tools the workspace may call, and calling one.
func (s *Server) registerCalls(api huma.API) {
	register(api, huma.Operation{OperationID: "list-served-tools", Method: http.MethodGet, Path: "/v1/tools/served",
		Summary: "The tools the caller may call now: the server's own and the workspace's stored ones, as the dispatcher serves them, less those the workspace's entitlements do not give the caller"}, func(ctx context.Context, _ *struct{}) (*toolsOutput, error) {
		out := &toolsOutput{}
		out.Body.Tools = []apiTool{}
		ctx = platform.WithActor(ctx, s.actor(ctx))
		disp := s.tenant(ctx, s.workspaceID(ctx)).disp
		tools := disp.ToolsFor(ctx)
		for _, t := range tools {
			sp := t.Spec()
			out.Body.Tools = append(out.Body.Tools, apiTool{Name: sp.Name, Description: sp.Description, InputSchema: sp.InputSchema, OutputSchema: sp.OutputSchema,
				Examples: sp.Examples, Annotations: annotationsOf(sp)})
		}
		out.Body.Remotes = remotesFor(s.remoteStatus(), tools, disp.Entitled != nil && disp.Entitled(ctx) != nil)
		return out, nil
	})

	schemas := api.OpenAPI().Components.Schemas
	// With a response of its own (429), huma adds no default one: the others are the
	// problems every operation answers, given here as huma gives them.
	problems := schemas.Schema(reflect.TypeFor[ProblemDetails](), true, "Error")
	register(api, huma.Operation{OperationID: "call-tool", Method: http.MethodPost, Path: "/v1/tools/{name}/call",
		Summary: "Call a tool through the dispatcher, as every other door does, recorded on a thread",
		Responses: map[string]*huma.Response{
			"403": {Description: "The caller may not call (a viewer's key), or the tool acts as the caller at a provider they have not connected (or not with the scopes it needs): that problem's code is authorization_required, and it says where to connect. The call is recorded, and calling again once connected runs it.",
				Content: map[string]*huma.MediaType{"application/problem+json": {Schema: &huma.Schema{OneOf: []*huma.Schema{
					huma.SchemaFromType(schemas, reflect.TypeFor[AuthorizationProblem]()), problems}}}}},
			"429": {Description: "A limit on how often the caller may call is reached: the call did not run. Retry-After says when to try again.",
				Headers: map[string]*huma.Param{"Retry-After": {Description: "Seconds to wait before calling again.", Schema: &huma.Schema{Type: "integer"}}},
				Content: map[string]*huma.MediaType{"application/problem+json": {Schema: huma.SchemaFromType(schemas, reflect.TypeFor[LimitProblem]())}}},
			"default": {Description: "Error", Content: map[string]*huma.MediaType{"application/problem+json": {Schema: problems}}},
		}},
		func(ctx context.Context, in *callInput) (*callOutput, error) {
			a := s.actor(ctx)
			scope, err := s.p.CallScope(ctx, a, in.Body.ThreadID)
			if err != nil {
				return nil, problem(err, "body")
			}
			ctx = quiver.WithDoor(quiver.WithScope(platform.WithActor(ctx, a), scope), quiver.DoorHTTP)
			r, err := s.tenant(ctx, scope.WorkspaceID).disp.Dispatch(ctx, quiver.Call{ID: ids.New("call"), Name: in.Name, Args: in.Body.Args})
			if err != nil {
				// The call ran but its record could not be stored, even tried again for a while:
				// what is answered is recorded, so the caller hears that instead of the result.
				s.logger.ErrorContext(ctx, "server: recording an API call", "tool", in.Name, "err", err)
				return nil, problemf(http.StatusServiceUnavailable, CodeUnavailable,
					fmt.Sprintf("the tool %s ran, but its record could not be stored (%v): its result is not answered unrecorded; "+
						"look at the thread before calling it again", in.Name, err))
			}
			if r.Code == quiver.CodeRateLimited || r.Code == quiver.CodeQuotaExhausted {
				return nil, limitedProblem(r)
			}
			if r.Code == quiver.CodeAuthorizationRequired {
				return nil, authorizationProblem(r)
			}
			out := &callOutput{}
			out.Body.ThreadID, out.Body.Result = scope.ThreadID, r
			return out, nil
		})
}

// limitedProblem is the answer to a call a limit refused: 429, with Retry-After and the
// result's words and code (rate_limited or quota_exhausted), which the thread records too.
func limitedProblem(r *quiver.Result) error {
	var meta struct {
		RetryAfter int `json:"retry_after_seconds"`
	}
	_ = json.Unmarshal(r.Meta, &meta)
	h := http.Header{}
	h.Set("Retry-After", strconv.Itoa(max(1, meta.RetryAfter)))
	return huma.ErrorWithHeaders(&LimitProblem{Type: "about:blank", Title: http.StatusText(http.StatusTooManyRequests),
		Status: http.StatusTooManyRequests, Detail: r.Error, Code: string(r.Code)}, h)
}

// authorizationProblem is the answer to a call that needs the caller's connection to a
// provider: 403, with the provider and where to connect.
func authorizationProblem(r *quiver.Result) error {
	var meta struct {
		Provider string   `json:"provider"`
		URL      string   `json:"authorization_url"`
		Scopes   []string `json:"scopes"`
	}
	_ = json.Unmarshal(r.Meta, &meta)
	return &AuthorizationProblem{Type: "about:blank", Title: http.StatusText(http.StatusForbidden), Status: http.StatusForbidden, Detail: r.Error,
		Code: string(r.Code), Provider: meta.Provider, AuthorizationURL: meta.URL, Scopes: meta.Scopes}
}

// remotesFor is the remote MCP servers as the caller's listing reports them: every one, as a
// remote that is down would otherwise just be missing from the list; to a caller the
// workspace's entitlements restrict, only those with tools it may call (tools), each with as
// many as it may call, so that the listing names nothing the caller may not see.
func remotesFor(status []mcp.RemoteStatus, tools []*quiver.Tool, restricted bool) []apiRemote {
	var mine map[string]int
	if restricted {
		mine = map[string]int{}
		for _, t := range tools {
			if name, ok := strings.CutPrefix(t.Spec().Source, string(quiver.SourceMCP)+":"); ok {
				mine[name]++
			}
		}
	}
	var out []apiRemote
	for _, st := range status {
		n := st.Tools
		if restricted {
			if n = mine[st.Name]; n == 0 {
				continue
			}
		}
		out = append(out, apiRemote{Name: st.Name, Connected: st.Connected, Tools: n, LastError: st.LastError, LastAttempt: st.LastAttempt})
	}
	return out
}

// registerThreadReads adds reading a thread and its messages.
func (s *Server) registerThreadReads(api huma.API) {
	register(api, huma.Operation{OperationID: "get-thread", Method: http.MethodGet, Path: "/v1/threads/{id}",
		Summary: "A thread"}, func(ctx context.Context, in *threadInput) (*threadOutput, error) {
		v, err := s.p.ThreadView(ctx, s.actor(ctx), in.ID)
		if err != nil {
			return nil, problem(err, "query")
		}
		// What the event stream's state says, so that a client that polls learns it too.
		st := s.p.ThreadState(ctx, v.Thread.WorkspaceID, v.Thread)
		out := &threadView{Thread: *v.Thread, Status: string(st.Status), Run: st.Run, Pending: st.Pending, Data: v.Data, Instances: v.Instances}
		return &threadOutput{Body: out}, nil
	})

	register(api, huma.Operation{OperationID: "list-messages", Method: http.MethodGet, Path: "/v1/threads/{id}/messages",
		Summary: "A thread's messages, oldest first, the newest page unless before says otherwise"},
		func(ctx context.Context, in *messagesInput) (*messagesOutput, error) {
			msgs, err := s.p.Messages(ctx, s.actor(ctx), in.ID, store.Page{Before: in.Before, Limit: in.Limit})
			if err != nil {
				return nil, problem(err, "query")
			}
			out := &messagesOutput{}
			out.Body.Messages = msgs
			if out.Body.Messages == nil {
				out.Body.Messages = []*store.Message{}
			}
			return out, nil
		})
}

type createThreadInput struct {
	Body struct {
		Agent     string            `json:"agent,omitempty" maxLength:"128" doc:"The agent the thread is for: its required variables must resolve."`
		Tags      []string          `json:"tags,omitempty" maxItems:"32" doc:"Tags to find the thread by."`
		Instances []string          `json:"instances,omitempty" maxItems:"16" doc:"Instances to give the thread, each with a state object of its own that calls naming _instance read and write."`
		Variables map[string]string `json:"variables,omitempty" maxProperties:"64" doc:"Values set on the thread as it is created, by name: they count towards the variables the agent requires, and one the agent, its tools or its sub-agents declare secret is stored encrypted and never shown again. Only with an agent."`
	}
}

type createThreadOutput struct {
	Status int `json:"-"`
	Body   *store.Thread
}

type runInput struct {
	ID   string `path:"id" maxLength:"64"`
	Body struct {
		Agent   string `json:"agent,omitempty" minLength:"1" maxLength:"128" doc:"The agent that runs; absent: the agent that has the thread (its own, or after a handoff the one it was handed to)."`
		Message string `json:"message,omitempty" maxLength:"1000000" doc:"The user's message the run answers; empty resumes the thread."`
	}
}

type runOutput struct {
	Status int `json:"-"`
	Body   struct {
		ThreadID string `json:"thread_id"`
		JobID    int64  `json:"job_id" doc:"The run's job; the thread's status says when it is running, and its state how the run ended."`
	}
}

// registerRuns adds the endpoints of background runs, when the server has them.
func (s *Server) registerRuns(api huma.API) {
	register(api, huma.Operation{OperationID: "create-thread", Method: http.MethodPost, Path: "/v1/threads",
		Summary: "Create a thread, for an agent whose required variables must resolve", DefaultStatus: http.StatusCreated},
		func(ctx context.Context, in *createThreadInput) (*createThreadOutput, error) {
			th, err := s.p.OpenThread(ctx, s.actor(ctx), platform.NewThread{Agent: in.Body.Agent, Tags: in.Body.Tags, Instances: in.Body.Instances,
				Variables: in.Body.Variables})
			if err != nil {
				return nil, unprocessableIfMissing(problem(err, "body"))
			}
			return &createThreadOutput{Status: http.StatusCreated, Body: th}, nil
		})
	register(api, huma.Operation{OperationID: "start-run", Method: http.MethodPost, Path: "/v1/threads/{id}/runs",
		Summary: "Start an agent run on the thread, in the background", DefaultStatus: http.StatusAccepted},
		func(ctx context.Context, in *runInput) (*runOutput, error) {
			name, err := s.p.RunAgent(ctx, s.actor(ctx), in.ID, in.Body.Agent)
			var pe *platform.Error
			if errors.As(err, &pe) && pe.Kind == platform.Invalid {
				// The agent is a required field here, as the schema made it before the thread's
				// agent could stand in for it: 422, as for any required field left out.
				answer := problem(err, "body")
				if p, ok := answer.(*ProblemDetails); ok {
					p.Status, p.Title = http.StatusUnprocessableEntity, http.StatusText(http.StatusUnprocessableEntity)
				}
				return nil, answer
			}
			if err != nil {
				return nil, problem(err, "body")
			}
			run, err := s.p.StartRun(ctx, s.actor(ctx), in.ID, name, in.Body.Message)
			if err != nil {
				return nil, unprocessableIfMissing(problem(err, "body"))
			}
			return runAnswer(run, nil)
		})
	register(api, huma.Operation{OperationID: "decide", Method: http.MethodPost, Path: "/v1/threads/{id}/decisions",
		Summary:       "Decide on a call that waits for a person's confirmation; the run resumes in the background",
		DefaultStatus: http.StatusAccepted},
		func(ctx context.Context, in *decisionInput) (*runOutput, error) {
			b := &in.Body
			return runAnswer(s.p.Decide(ctx, s.actor(ctx), in.ID, platform.NewDecision{Agent: b.Agent, CallID: b.CallID,
				Action: quiver.DecisionAction(b.Action), Args: b.Args, Message: b.Message}))
		})
}

// runAnswer is the answer to an operation that queues a run: 202 with the run's job.
func runAnswer(r *platform.Run, err error) (*runOutput, error) {
	if err != nil {
		return nil, problem(err, "body")
	}
	out := &runOutput{Status: http.StatusAccepted}
	out.Body.ThreadID, out.Body.JobID = r.ThreadID, r.JobID
	return out, nil
}

type decisionInput struct {
	ID   string `path:"id" maxLength:"64"`
	Body struct {
		// Optional: after a handoff the agent that has the thread is the one whose run waits.
		Agent   string          `json:"agent,omitempty" minLength:"1" maxLength:"128" doc:"The agent whose run waits; absent: the agent that has the thread (after a handoff, the one it was handed to)."`
		CallID  string          `json:"call_id" minLength:"1" maxLength:"128" doc:"The call that waits for the decision (the thread's state names it)."`
		Action  string          `json:"action" enum:"approve,edit,deny" doc:"approve runs the call; edit runs it with args, validated again; deny answers it with message."`
		Args    json.RawMessage `json:"args,omitempty" doc:"The edited arguments (edit only)."`
		Message string          `json:"message,omitempty" maxLength:"10000" doc:"Told to the model (deny)."`
	}
}

// workspaceID is the workspace a request acts in: its key's, or the server's own on a server
// without keys. Every read and write of the API names it, so no request reaches another
// workspace's records.
func (s *Server) workspaceID(ctx context.Context) string {
	if p, ok := PrincipalFrom(ctx); ok && p.WorkspaceID != "" {
		return p.WorkspaceID
	}
	return s.cfg.WorkspaceID
}

// actor is who a request acts as, for the platform's operations: its key's workspace, user
// and role, with what the workspace's entitlements decide by (the token's claims, the key's
// toolsets, the toolset address the request came through: see withToolset), or, on a server
// that asks for no key, an operator of its workspace. Only an admin of the server's own
// workspace is its operator: a member's or viewer's key there is a tenant's like any other.
func (s *Server) actor(ctx context.Context) platform.Actor {
	p, _ := PrincipalFrom(ctx)
	if s.cfg.Auth == nil {
		a := platform.Operator(s.workspaceID(ctx), p.UserID)
		a.Toolset = toolsetFrom(ctx)
		return a
	}
	return platform.Actor{WorkspaceID: s.workspaceID(ctx), UserID: p.UserID, KeyID: p.KeyID, Who: p.Who(), Role: p.Role,
		Operator: p.WorkspaceID == s.cfg.WorkspaceID && p.Role == store.KeyRoleAdmin,
		Claims:   p.Claims, Toolsets: p.Toolsets, Toolset: toolsetFrom(ctx)}
}
