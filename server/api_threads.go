package server

import (
	"cmp"
	"context"
	"encoding/json"
	"maps"
	"mime"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/vars"
)

// The thread endpoints of /v1 besides a thread and its messages (api.go) and its runs
// (api_runs.go): the workspace's threads listed by agent, tag and status; a thread's file
// system (its attachments among its files); and the variables set on a thread,
// whose secret values are encrypted at rest as quiver vars set does it and never shown.
//
// Every endpoint takes the thread's id in the path and answers 404 for a thread that is not
// the key's workspace's, exactly as for one that does not exist; an id that is not a thread's
// at all (no thr_ prefix) is a 400 naming path.id.

// registerThreadLists adds the thread endpoints of this file.
func (s *Server) registerThreadLists(api huma.API) {
	register(api, huma.Operation{OperationID: "list-threads", Method: http.MethodGet, Path: "/v1/threads",
		Summary: "The workspace's threads, newest first, a page at a time, optionally by agent, tag and status"}, s.listThreads)
	s.registerThreadFiles(api)
	s.registerThreadVariables(api)
	s.registerVariablesRequests(api)
	s.registerConsoleAPI(api)
	s.registerTrace(api)
}

// ---- the thread list

type threadsInput struct {
	Limit  int    `query:"limit" minimum:"1" maximum:"100" default:"20" doc:"Threads per page, 1 to 100."`
	Cursor string `query:"cursor" maxLength:"1024" doc:"Where the page starts: the next_cursor of the page before, listed with the same agent, tag, status and name; empty for the first. Opaque: a cursor altered, or given with other filters, is refused (400)."`
	Agent  string `query:"agent" maxLength:"128" doc:"Only the threads of this agent (its id)."`
	Tag    string `query:"tag" maxLength:"1024" doc:"Only the threads that have this tag (a tag is at most 1024 bytes)."`
	Status string `query:"status" enum:"idle,running,waiting,failed,terminated" doc:"Only the threads in this status: idle keeps every thread no run is going on (waiting and failed ones among them); waiting, those whose last run paused on a call; failed, those whose last run failed."`
	Name   string `query:"name" maxLength:"128" doc:"Only the threads whose name (the tag name:<value>) contains this text, in any case."`
}

// threadItem is a thread of a list, with its status as every door shows it.
type threadItem struct {
	store.Thread
	Status string         `json:"status" enum:"idle,running,waiting,failed,terminated" doc:"idle, running or terminated; waiting when its last run paused on a call (a person's decision or a client's result); failed when its last run could not start or go on, which run says (reason, error) until a later run ends otherwise."`
	Run    *agent.Outcome `json:"run,omitempty" doc:"How the thread's last run ended: finished, paused, or failed (reason and error say why)."`
}

type threadsOutput struct {
	Body struct {
		Threads    []*threadItem `json:"threads"`
		NextCursor string        `json:"next_cursor,omitempty" doc:"The cursor of the next page; absent on the last."`
	}
}

func (s *Server) listThreads(ctx context.Context, in *threadsInput) (*threadsOutput, error) {
	page, err := s.p.Threads(ctx, s.actor(ctx), store.ThreadFilter{AgentID: in.Agent, Tag: in.Tag,
		Name: in.Name, Limit: in.Limit, Cursor: in.Cursor}, platform.Status(in.Status))
	if err != nil {
		return nil, problem(err, "query")
	}
	out := &threadsOutput{}
	out.Body.Threads, out.Body.NextCursor = make([]*threadItem, len(page.Threads)), page.NextCursor
	for i, th := range page.Threads {
		out.Body.Threads[i] = &threadItem{Thread: *th.Thread, Status: string(th.Status), Run: th.Run}
	}
	return out, nil
}

// ---- the thread's file system

type threadFilesInput struct {
	ID   string `path:"id" maxLength:"64" doc:"The thread's id (thr_...)."`
	Path string `query:"path" default:"/" maxLength:"1024" doc:"The directory to list, with everything under it (or a file, listed alone): an absolute path of the thread's file system like /attachments, without . or .. segments, a trailing /, backslashes or control characters."`
	// A thread may hold up to store.FileLimits.MaxThreadEntries (100,000 by default): too
	// many for one answer.
	Limit int `query:"limit" minimum:"1" maximum:"1000" default:"1000" doc:"The most entries to list, 1 to 1000; truncated says when there were more (list a directory further down to see them)."`
}

type threadFilesOutput struct {
	Body struct {
		Path  string            `json:"path" doc:"The path listed."`
		Files []*store.FileInfo `json:"files" doc:"The files and directories under path, depth first: each directory's entries by name, each directory followed by what it holds."`
		// Truncated is set when the listing stopped at limit.
		Truncated bool `json:"truncated" doc:"Whether there were more entries than limit."`
	}
}

type threadFileInput struct {
	ID   string `path:"id" maxLength:"64" doc:"The thread's id (thr_...)."`
	Path string `path:"path" maxLength:"1024" doc:"The file's path in the thread's file system without its leading slash, its slashes as they are: attachments/report.pdf is /attachments/report.pdf."`
}

// threadFileOutput is a file's content, as it is stored.
type threadFileOutput struct {
	ContentType   string `header:"Content-Type" doc:"The MIME type stored with the file."`
	ContentLength int64  `header:"Content-Length" doc:"The file's size in bytes."`
	// A file is a tool's output, not the server's: a browser must save it, never render it as
	// a page of the API's origin (an HTML or SVG file could run script there).
	ContentDisposition string `header:"Content-Disposition" doc:"attachment, with the file's name: the one it came with (an attachment's, as the tool gave it), else its path's last segment."`
	NoSniff            string `header:"X-Content-Type-Options" doc:"nosniff: the type is the stored one."`
	Sandbox            string `header:"Content-Security-Policy" doc:"sandbox: nothing in the file runs."`
	Body               []byte
}

// filePathPattern is how the download route is registered: the rest of the URL path, slashes
// included, is the file's path (Go's ServeMux wildcard). OpenAPI has no such parameter; the
// document names it {path}, and its description says slashes stay.
const (
	filePathPattern = "/v1/threads/{id}/files/{path...}"
	filePathInDoc   = "/v1/threads/{id}/files/{path}"
)

// registerThreadFiles adds the endpoints of a thread's file system.
func (s *Server) registerThreadFiles(api huma.API) {
	register(api, huma.Operation{OperationID: "list-thread-files", Method: http.MethodGet, Path: "/v1/threads/{id}/files",
		Summary: "The thread's files and directories (its attachments are under /attachments), under a path"}, s.listThreadFiles)

	register(api, huma.Operation{OperationID: "get-thread-file", Method: http.MethodGet, Path: filePathPattern,
		Summary:     "A file of the thread, as stored: its content with its MIME type",
		Description: "The URL path after /files/ is the file's path in the thread's file system (GET /v1/threads/{id}/files/attachments/report.pdf). A path that breaks the file system's rules (a backslash, a control character, a trailing slash) is a 400; a directory too (list it instead); a missing file a 404. A URL with . or .. segments is cleaned by the HTTP server, which redirects to the clean URL before any handler sees it, so it never leaves the thread's file system.",
		Responses: map[string]*huma.Response{"200": {
			Description: "The file's content; Content-Type is the MIME type stored with it.",
			Content:     map[string]*huma.MediaType{"*/*": {Schema: &huma.Schema{Type: huma.TypeString, Format: "binary"}}}, // whatever type was stored
		}}}, s.getThreadFile)
	// The route above is Go's pattern; the document names the parameter as OpenAPI does.
	if doc := api.OpenAPI(); doc.Paths[filePathPattern] != nil {
		doc.Paths[filePathInDoc] = doc.Paths[filePathPattern]
		delete(doc.Paths, filePathPattern)
	}
}

func (s *Server) listThreadFiles(ctx context.Context, in *threadFilesInput) (*threadFilesOutput, error) {
	l, err := s.p.ThreadFiles(ctx, s.actor(ctx), in.ID, in.Path, in.Limit)
	if err != nil {
		return nil, problem(err, "query")
	}
	out := &threadFilesOutput{}
	out.Body.Path, out.Body.Files, out.Body.Truncated = in.Path, l.Files, l.Truncated
	return out, nil
}

func (s *Server) getThreadFile(ctx context.Context, in *threadFileInput) (*threadFileOutput, error) {
	data, fi, err := s.p.ThreadFile(ctx, s.actor(ctx), in.ID, "/"+in.Path)
	if err != nil {
		return nil, problem(err, "query", "path")
	}
	return &threadFileOutput{
		ContentType:        cmp.Or(fi.MimeType, "application/octet-stream"),
		ContentLength:      int64(len(data)),
		ContentDisposition: mime.FormatMediaType("attachment", map[string]string{"filename": fi.DisplayName()}),
		NoSniff:            "nosniff",
		Sandbox:            "sandbox",
		Body:               data,
	}, nil
}

// ---- the thread's variables

// maxVariableValue caps a value, secret or not, in bytes: vars.MaxValueBytes, as quiver vars
// set (the maxLength of VariableBody.Value, which counts characters, says the same).
const maxVariableValue = vars.MaxValueBytes

// ThreadVariable is a variable set on a thread, as the API shows it: a secret's value never.
type ThreadVariable struct {
	Name   string `json:"name"`
	Secret bool   `json:"secret" doc:"A secret: encrypted at rest, given only to the code of tools that declare it secret, never shown."`
	Scoped bool   `json:"scoped" doc:"Provided as scoped: it flows down to the thread's descendants even for variables they declare scoped."`
	Set    bool   `json:"set" doc:"The thread has a value for it: always true here, the one thing a secret shows."`
	// Value is a pointer, so that an empty text value shows as "" and a secret's not at all.
	Value     *string   `json:"value,omitempty" doc:"The value of a text variable; absent for a secret."`
	UpdatedAt time.Time `json:"updated_at" doc:"When the value was last set."`
}

// threadVariableOf shows a stored value; a secret's (sealed) value stays out.
func threadVariableOf(v *store.Variable) *ThreadVariable {
	out := &ThreadVariable{Name: v.Name, Secret: v.Secret, Scoped: v.Scoped, Set: true, UpdatedAt: v.UpdatedAt}
	if !v.Secret {
		value := v.Value
		out.Value = &value
	}
	return out
}

type threadVariablesOutput struct {
	Body struct {
		Variables []*ThreadVariable `json:"variables" doc:"By name."`
	}
}

type threadVariableOutput struct {
	Body *ThreadVariable
}

// variableNameInput names a variable of a thread. The store takes names of up to 256 bytes of
// any text; a name in a URL is kept to what tools declare and environments take.
type variableNameInput struct {
	ID   string `path:"id" maxLength:"64" doc:"The thread's id (thr_...)."`
	Name string `path:"name" minLength:"1" maxLength:"128" pattern:"^[A-Za-z0-9_][A-Za-z0-9_.-]*$" patternDescription:"letters, digits, _, . and -, not starting with . or -" doc:"The variable's name: 1 to 128 letters (A-Z, a-z), digits, _, . and -, not starting with . or -."`
}

type setVariableInput struct {
	// The fields of variableNameInput: huma reads no parameter of an embedded struct.
	ID   string `path:"id" maxLength:"64" doc:"The thread's id (thr_...)."`
	Name string `path:"name" minLength:"1" maxLength:"128" pattern:"^[A-Za-z0-9_][A-Za-z0-9_.-]*$" patternDescription:"letters, digits, _, . and -, not starting with . or -" doc:"The variable's name: 1 to 128 letters (A-Z, a-z), digits, _, . and -, not starting with . or -."`
	// RawBody (a VariableBody) is read here, not by huma: huma's problems show the value given
	// when it is short (a body that is not JSON, whole), and this body carries secrets.
	RawBody []byte
}

// VariableBody is the body of PUT /v1/threads/{id}/variables/{name}.
type VariableBody struct {
	Value  string `json:"value" maxLength:"65536" doc:"The value: UTF-8 text without NUL, at most 65536 bytes. A secret's is encrypted before it is stored and never shown again, not even in a problem about the request."`
	Secret bool   `json:"secret,omitempty" doc:"The value is a secret."`
	Scoped bool   `json:"scoped,omitempty" doc:"Provide the value as scoped: it flows down to the thread's descendants, also for variables they declare scoped."`
}

// parseVariableBody reads a VariableBody as huma would, strictly (no other field, no other
// type), with problems that name the field at fault and never show a value given.
func parseVariableBody(raw []byte) (VariableBody, error) {
	var b VariableBody
	if err := checkKeys(raw, reflect.TypeFor[VariableBody]()); err != nil {
		ke := err.(*keyError)
		return b, fieldError(http.StatusBadRequest, ke.loc, ke.msg)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return b, fieldError(http.StatusBadRequest, "body", `want a JSON object: {"value": "...", "secret": false, "scoped": false}`)
	}
	names := slices.Sorted(maps.Keys(fields))
	for _, k := range names {
		if k != "value" && k != "secret" && k != "scoped" {
			loc := "body"
			if showable(k) { // a location is no place for a long or strange key
				loc += "." + k
			}
			return b, fieldError(http.StatusBadRequest, loc, "unknown field: the body takes value, secret and scoped")
		}
	}
	raw, ok := fields["value"]
	if !ok {
		return b, fieldError(http.StatusBadRequest, "body.value", "required: the value to set")
	}
	if err := json.Unmarshal(raw, &b.Value); err != nil || raw[0] != '"' {
		return b, fieldError(http.StatusBadRequest, "body.value", "want a string")
	}
	for _, f := range []struct {
		name string
		dst  *bool
	}{{"secret", &b.Secret}, {"scoped", &b.Scoped}} {
		if raw, ok := fields[f.name]; ok {
			if err := json.Unmarshal(raw, f.dst); err != nil || raw[0] == 'n' { // null is no answer
				return b, fieldError(http.StatusBadRequest, "body."+f.name, "want true or false")
			}
		}
	}
	// Its words never go into an answer or a log: only its size does.
	switch v := b.Value; {
	case len(v) > maxVariableValue:
		return b, fieldError(http.StatusBadRequest, "body.value", "the value is "+strconv.Itoa(len(v))+" bytes, over the "+strconv.Itoa(maxVariableValue)+" allowed")
	case strings.IndexByte(v, 0) >= 0: // JSON strings are UTF-8 once decoded
		return b, fieldError(http.StatusBadRequest, "body.value", "the value must be text without NUL")
	}
	return b, nil
}

// registerThreadVariables adds the endpoints of a thread's variables.
func (s *Server) registerThreadVariables(api huma.API) {
	register(api, huma.Operation{OperationID: "list-thread-variables", Method: http.MethodGet, Path: "/v1/threads/{id}/variables",
		Summary: "The variables set on the thread (not those it inherits), secrets without their value"}, s.listThreadVariables)
	const one = "/v1/threads/{id}/variables/{name}"
	register(api, huma.Operation{OperationID: "set-thread-variable", Method: http.MethodPut, Path: one,
		Summary: "Set a variable on the thread; a secret is encrypted at rest"}, s.setThreadVariable)
	// The body is read by the handler (RawBody); the document describes what it reads.
	if doc := api.OpenAPI(); doc.Paths[one] != nil && doc.Paths[one].Put != nil {
		doc.Paths[one].Put.RequestBody = &huma.RequestBody{Required: true, Content: map[string]*huma.MediaType{
			"application/json": {Schema: huma.SchemaFromType(doc.Components.Schemas, reflect.TypeFor[VariableBody]())}}}
	}
	register(api, huma.Operation{OperationID: "delete-thread-variable", Method: http.MethodDelete, Path: "/v1/threads/{id}/variables/{name}",
		Summary: "Remove a variable's value from the thread", DefaultStatus: http.StatusNoContent}, s.deleteThreadVariable)
}

// threadIDInput names a thread.
type threadIDInput struct {
	ID string `path:"id" maxLength:"64" doc:"The thread's id (thr_...)."`
}

func (s *Server) listThreadVariables(ctx context.Context, in *threadIDInput) (*threadVariablesOutput, error) {
	return s.listVariables(ctx, platform.Owner{Layer: store.LayerThread, ID: in.ID})
}

func (s *Server) setThreadVariable(ctx context.Context, in *setVariableInput) (*threadVariableOutput, error) {
	return s.setVariable(ctx, platform.Owner{Layer: store.LayerThread, ID: in.ID}, in.Name, in.RawBody)
}

func (s *Server) deleteThreadVariable(ctx context.Context, in *variableNameInput) (*struct{}, error) {
	return nil, s.deleteVariable(ctx, platform.Owner{Layer: store.LayerThread, ID: in.ID}, in.Name)
}

// listVariables, setVariable and deleteVariable are the variable endpoints of every layer:
// a thread's, an agent's, a user's.
func (s *Server) listVariables(ctx context.Context, o platform.Owner) (*threadVariablesOutput, error) {
	stored, err := s.p.Variables(ctx, s.actor(ctx), o)
	if err != nil {
		return nil, problem(err, "query", "agent")
	}
	out := &threadVariablesOutput{}
	out.Body.Variables = make([]*ThreadVariable, len(stored))
	for i, v := range stored {
		out.Body.Variables[i] = threadVariableOf(v)
	}
	return out, nil
}

func (s *Server) setVariable(ctx context.Context, o platform.Owner, name string, raw []byte) (*threadVariableOutput, error) {
	body, err := parseVariableBody(raw)
	if err != nil {
		return nil, err
	}
	v, err := s.p.SetVariable(ctx, s.actor(ctx), o, platform.NewValue{Name: name, Value: body.Value, Secret: body.Secret, Scoped: body.Scoped})
	if err != nil {
		return nil, problem(err, "body", "agent", "name")
	}
	return &threadVariableOutput{Body: threadVariableOf(v)}, nil
}

func (s *Server) deleteVariable(ctx context.Context, o platform.Owner, name string) error {
	if err := s.p.DeleteVariable(ctx, s.actor(ctx), o, name); err != nil {
		return problem(err, "body", "agent", "name")
	}
	return nil
}
