package interop

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
)

// advisoryDoc is a document whose getPet answers a pet with an integer id.
const advisoryDoc = `openapi: 3.0.3
info: {title: Pets, version: "1"}
paths:
  /pets/{petId}:
    get:
      operationId: getPet
      parameters: [{name: petId, in: path, required: true, schema: {type: integer}}]
      responses:
        '200':
          description: a pet
          content:
            application/json:
              schema: {type: object, required: [id, name], properties: {id: {type: integer}, name: {type: string}}}
`

// TestTypeScriptSDKAdvisoryOutput: an OpenAPI tool whose service answers other than its
// document says (an id as text where an integer is described) is called by the official
// TypeScript SDK, which refuses a result whose structuredContent does not match a declared
// outputSchema. The default source lists the tool without its output schema (advisory), so
// the SDK takes the answer, the warning in _meta; a strict source declares it and answers an
// error result. Over HTTP (the SDK's legacy and auto modes, which settle on 2025-11-25 there)
// and stdio (auto: 2026-07-28).
func TestTypeScriptSDKAdvisoryOutput(t *testing.T) {
	npmDir(t)
	service := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"seven","name":"Rex"}`)
	}))
	defer service.Close()
	dir := t.TempDir()
	doc, config := filepath.Join(dir, "pets.yaml"), filepath.Join(dir, "quiver.yaml")
	entries := fmt.Sprintf("openapi:\n  - {name: loose, document: %q, servers: [%q]}\n  - {name: strict, document: %q, servers: [%q], strict: true}\n",
		doc, service.URL, doc, service.URL)
	for path, text := range map[string]string{doc: advisoryDoc, config: entries} {
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	endpoint, key := serve(t, "--config", config)
	for _, mode := range []string{"legacy", "auto"} {
		t.Run("http/"+mode, func(t *testing.T) { runJS(t, "advisory.mjs", "http", endpoint, key, mode) })
	}
	t.Run("stdio", func(t *testing.T) { runJS(t, "advisory.mjs", "stdio", quiverBinary(t), config, "auto") })
}
