package server_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/quiverhq/quiver/server"
)

// sendAPI sends a request to the API with client: body is sent as is when a string, else as
// JSON (none when nil); key, when not empty, is the bearer key. It returns the answer, read whole.
func sendAPI(t *testing.T, client *http.Client, method, url, key string, body any) (*http.Response, []byte) {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res, data
}

// lockedBuffer is a buffer a server's logger writes while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// documentPaths reads the API's OpenAPI document and checks that it has every operation of
// want (path -> methods); it returns the document's paths, each method's operation as JSON.
func documentPaths(t *testing.T, want map[string][]string) map[string]map[string]json.RawMessage {
	t.Helper()
	doc, err := server.OpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		t.Fatal(err)
	}
	for p, methods := range want {
		for _, m := range methods {
			if d.Paths[p][m] == nil {
				t.Errorf("the document has no %s %s", m, p)
			}
		}
	}
	return d.Paths
}
