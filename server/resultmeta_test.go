package server_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/internal/apicontract"
	"github.com/quiverhq/quiver/server"
	"github.com/quiverhq/quiver/store/memstore"
	"github.com/quiverhq/quiver/tools/runcode"
)

// run_code over /v1 answers one result (issue 35): the code's value as the call's value, its
// duration and console output in meta, and a throw as an error result with its status in
// meta; the thread's messages hold the same result. Answers are checked against the served
// document.
func TestRunCodeResultOverTheAPI(t *testing.T) {
	st := memstore.New()
	t.Cleanup(func() { st.Close() })
	reg := &quiver.Registry{}
	mustDo(t, reg.Register(runcode.Tool))
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := server.New(ctx, server.Config{Platform: newPlatform(t, st, reg), Logger: slog.New(slog.DiscardHandler)})
	mustDo(t, err)
	ts := httptest.NewServer(apicontract.Handler(t, srv.Handler()))
	t.Cleanup(func() { ts.Close(); cancel(); srv.Close() })

	type result struct {
		Status string          `json:"status"`
		Text   string          `json:"result"`
		Value  json.RawMessage `json:"value"`
		Error  string          `json:"error"`
		Meta   runcode.Meta    `json:"meta"`
	}
	tests := []struct {
		name, code    string
		status, value string
		logs, error   string
		ended         string // meta's status
	}{
		{"a value", `export default () => 42`, "success", "42", "", "", ""},
		{"a value and console output", `export default () => { console.log("hi"); return [1] }`, "success", "[1]", "hi", "", ""},
		{"a throw", `export default () => { throw new RangeError("too far") }`, "error", "", "", "RangeError: too far", "error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body, _ := json.Marshal(map[string]any{"args": map[string]any{"code": tt.code}})
			resp, err := http.Post(ts.URL+"/v1/tools/run_code/call", "application/json", strings.NewReader(string(body)))
			mustDo(t, err)
			defer resp.Body.Close()
			var out struct {
				ThreadID string `json:"thread_id"`
				Result   result `json:"result"`
			}
			mustDo(t, json.NewDecoder(resp.Body).Decode(&out))
			r := out.Result
			if resp.StatusCode != 200 || r.Status != tt.status || string(r.Value) != tt.value || !strings.Contains(r.Error, tt.error) {
				t.Fatalf("%d %+v, want %s with value %s", resp.StatusCode, r, tt.status, tt.value)
			}
			if r.Meta.DurationMS <= 0 || string(r.Meta.Status) != tt.ended || (tt.logs != "") != (len(r.Meta.Logs) == 1) ||
				(tt.logs != "" && r.Meta.Logs[0].Text != tt.logs) {
				t.Errorf("meta %+v, want the duration, status %q and logs %q", r.Meta, tt.ended, tt.logs)
			}

			resp, err = http.Get(ts.URL + "/v1/threads/" + out.ThreadID + "/messages")
			mustDo(t, err)
			defer resp.Body.Close()
			var msgs struct {
				Messages []struct {
					Result *result `json:"result"`
				} `json:"messages"`
			}
			mustDo(t, json.NewDecoder(resp.Body).Decode(&msgs))
			var stored *result
			for _, m := range msgs.Messages {
				if m.Result != nil {
					stored = m.Result
				}
			}
			if stored == nil || stored.Status != r.Status || string(stored.Value) != string(r.Value) || stored.Meta.DurationMS != r.Meta.DurationMS ||
				stored.Meta.Status != r.Meta.Status || len(stored.Meta.Logs) != len(r.Meta.Logs) {
				t.Errorf("the thread holds %+v, want %+v", stored, r)
			}
		})
	}
}
