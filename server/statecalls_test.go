package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/jobs"
	"github.com/quiverhq/quiver/model"
	"github.com/quiverhq/quiver/model/scripted"
	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/schema"
	"github.com/quiverhq/quiver/server"
	"github.com/quiverhq/quiver/store/sqlite"
)

// The API door honours the stateful meta-fields through the same dispatcher: a call's output
// goes into its thread's state, once per path; the thread view shows the state; a call naming
// _delegate runs the server's saved prompt in a child thread; and another workspace sees none
// of it.
func TestAPIStatefulCalls(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "q.db")
	st, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	_, keyA := newMember(t, st, "alpha")
	_, keyB := newMember(t, st, "beta")

	reg := &quiver.Registry{}
	mustDo(t, reg.Register(quiver.Func("stamp", "Stamps a text.", func(_ context.Context, in struct {
		Text string `json:"text"`
	}) (map[string]string, error) {
		return map[string]string{"stamped": in.Text}, nil
	}, quiver.WithMetaFields(schema.OutputPathField, schema.InstanceField))))
	grade, err := quiver.ParseSchemaTool([]byte(`{"type":"object","description":"Grades a draft.","properties":{
		"_tool":{"const":"grade"},"draft":{"type":"string"},"_delegate":{},"_outputPath":{},
		"_output":{"type":"object","properties":{"score":{"type":"integer"}},"required":["score"]}},"required":["draft"]}`))
	mustDo(t, err)
	mustDo(t, reg.Register(grade))
	critic := scripted.Turns(scripted.Turn{Text: `{"calls":[],"output":{"score":8}}`})
	cat := &agent.Catalog{Prompts: map[string]*agent.Prompt{"critic": {Name: "critic", System: "You grade drafts.", Model: "scripted:critic"}},
		Agents: map[string]*agent.Agent{}}
	p, err := platform.New(platform.Config{Store: st, Registry: reg, Catalog: cat, Logger: slog.New(slog.DiscardHandler),
		OpenModel: func(spec string) (model.Model, error) {
			if spec != "scripted:critic" {
				return nil, fmt.Errorf("no model %s", spec)
			}
			return critic, nil
		}})
	mustDo(t, err)
	// Runs in the background as quiver serve has them, for POST /v1/threads.
	mustDo(t, p.StartJobs(ctx, func(ctx context.Context, c jobs.Config) (*jobs.Jobs, error) { return jobs.StartSQLite(ctx, path, c) }))
	t.Cleanup(func() { p.Stop(context.Background()) })
	sctx, cancel := context.WithCancel(ctx)
	srv, err := server.New(sctx, server.Config{Platform: p, Auth: &server.Authenticator{Keys: st}, Logger: slog.New(slog.DiscardHandler)})
	mustDo(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	mustDo(t, err)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(sctx, ln) }()
	t.Cleanup(func() { cancel(); <-done })
	w := &tenantWorld{url: "http://" + ln.Addr().String()}

	call := func(key, tool, args, threadID string) (string, map[string]any) {
		t.Helper()
		body := fmt.Sprintf(`{"args":%s}`, args)
		if threadID != "" {
			body = fmt.Sprintf(`{"args":%s,"thread_id":%q}`, args, threadID)
		}
		status, out := w.api(t, "POST", "/v1/tools/"+tool+"/call", key, body)
		if status != 200 {
			t.Fatalf("call %s %s: %d %v", tool, args, status, out)
		}
		res, _ := out["result"].(map[string]any)
		return out["thread_id"].(string), res
	}
	th, res := call(keyA, "stamp", `{"text":"one","_outputPath":"/first"}`, "")
	if res["status"] != "success" {
		t.Fatalf("first stamp: %v", res)
	}
	if _, res = call(keyA, "stamp", `{"text":"two","_outputPath":"/first"}`, th); res["code"] != string(quiver.CodeStateConflict) ||
		!strings.Contains(fmt.Sprint(res["error"]), "/first") {
		t.Fatalf("a second write of /first: %v", res)
	}
	if _, res = call(keyA, "stamp", `{"text":"x","_instance":"nope"}`, th); res["code"] != string(quiver.CodeInvalidArguments) ||
		!strings.Contains(fmt.Sprint(res["error"]), "no instances") {
		t.Fatalf("an unknown instance: %v", res)
	}
	if _, res = call(keyA, "grade", `{"draft":"a draft","_output":{"score":0},"_delegate":"critic","_outputPath":"/grade"}`, th); res["status"] != "success" {
		t.Fatalf("a delegated grade: %v", res)
	}
	if v, _ := json.Marshal(res["value"]); string(v) != `{"score":8}` {
		t.Errorf("the delegated grade's value %s", v)
	}
	status, view := w.api(t, "GET", "/v1/threads/"+th, keyA, "")
	if status != 200 {
		t.Fatalf("thread view: %d %v", status, view)
	}
	if data, _ := json.Marshal(view["data"]); string(data) != `{"first":{"stamped":"one"},"grade":{"score":8}}` {
		t.Errorf("the thread view's data %s", data)
	}
	status, kids := w.api(t, "GET", "/v1/threads/"+th+"/children", keyA, "")
	if status != 200 || !strings.Contains(toJSON(kids), "delegate:critic") {
		t.Errorf("the delegated request's child thread: %d %v", status, kids)
	}
	if status, _ := w.api(t, "GET", "/v1/threads/"+th, keyB, ""); status != 404 {
		t.Errorf("another workspace read the thread: %d", status)
	}

	// A thread made with instances: calls write to one of them.
	status, made := w.api(t, "POST", "/v1/threads", keyA, `{"instances":["east","west"]}`)
	if status != 201 {
		t.Fatalf("a thread with instances: %d %v", status, made)
	}
	withInstances := made["id"].(string)
	if _, res = call(keyA, "stamp", `{"text":"e","_outputPath":"/s","_instance":"east"}`, withInstances); res["status"] != "success" {
		t.Fatalf("a write to east: %v", res)
	}
	_, view = w.api(t, "GET", "/v1/threads/"+withInstances, keyA, "")
	if got := toJSON(map[string]any{"data": view["data"], "instances": view["instances"]}); got != `{"data":{},"instances":{"east":{"s":{"stamped":"e"}},"west":{}}}` {
		t.Errorf("the thread view: %s", got)
	}
	for _, body := range []string{`{"instances":["east wing"]}`, `{"instances":["a","a"]}`} {
		status, problem := w.api(t, "POST", "/v1/threads", keyA, body)
		if status != 400 || !strings.Contains(toJSON(problem), "body.instances[") {
			t.Errorf("%s: %d %v", body, status, problem)
		}
	}
}
