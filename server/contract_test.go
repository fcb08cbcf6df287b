package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/quiverhq/quiver/internal/apicontract"
)

// The API tests serve through apicontract.Handler: every /v1 answer they get is checked
// against the served OpenAPI document.

// The check itself: an answer that breaks the document is caught, one that keeps it is not.
func TestContractCheckCatchesDrift(t *testing.T) {
	req := httptest.NewRequest("GET", "/v1/tools/served", nil)
	json := http.Header{"Content-Type": {"application/json"}}
	for _, tt := range []struct {
		name, body string
		status     int
		ok         bool
	}{
		{"a tool as documented, its schema refusing other properties", `{"tools":[{"name":"a","description":"d","input_schema":{"type":"object","additionalProperties":false}}]}`, 200, true},
		{"a schema that is a boolean", `{"tools":[{"name":"a","description":"d","output_schema":true}]}`, 200, true},
		{"a name that is a number", `{"tools":[{"name":1,"description":"d"}]}`, 200, false},
		{"a field the document does not have", `{"tools":[{"name":"a","description":"d","secret":"x"}]}`, 200, false},
		{"a status the operation does not document", `{"tools":[]}`, 418, false},
	} {
		err := apicontract.Check(req, tt.status, json, []byte(tt.body))
		if (err == nil) != tt.ok {
			t.Errorf("%s: %v, want ok %v", tt.name, err, tt.ok)
		}
	}
}

// The event stream keeps its description too: each event's name is one the document names,
// and its data is valid against that event's component.
func TestEventStreamKeepsItsDocument(t *testing.T) {
	doc, err := apicontract.Document()
	mustDo(t, err)
	stream := doc.Paths.Find("/v1/threads/{id}/events").Get.Responses.Status(200).Value.Content.Get("text/event-stream").Schema.Value
	schemas := map[string]*openapi3.Schema{}
	for _, ev := range stream.Items.Value.OneOf {
		name := ev.Value.Properties["event"].Value.Enum[0].(string)
		schemas[name] = ev.Value.Properties["data"].Value
	}

	w := newTenantWorld(t)
	_, out := w.api(t, "POST", "/v1/tools/echo/call", w.keyA, `{"args":{"text":"hi"}}`)
	threadID, _ := out["thread_id"].(string)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", w.url+"/v1/threads/"+threadID+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+w.keyA)
	resp, err := http.DefaultClient.Do(req)
	mustDo(t, err)
	defer resp.Body.Close()
	seen := map[string]int{}
	lines := bufio.NewScanner(resp.Body)
	lines.Buffer(nil, 1<<20)
	var event string
	for lines.Scan() && (seen["state"] < 1 || seen["message"] < 2) {
		line := lines.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			s, ok := schemas[event]
			if !ok {
				t.Fatalf("event %q is not one the document names (%v)", event, slices.Collect(maps.Keys(schemas)))
			}
			var data any
			mustDo(t, json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &data))
			if err := s.VisitJSON(data); err != nil {
				t.Errorf("event %s: its data breaks the document: %v\n%s", event, err, line)
			}
			seen[event]++
		}
	}
	if seen["state"] < 1 || seen["message"] < 2 {
		t.Fatalf("the stream ended after %v: %v", seen, lines.Err())
	}
}
