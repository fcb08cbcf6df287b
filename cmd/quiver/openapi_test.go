package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/quiverhq/quiver"
)

// runOwn is runCLI with a registry of its own (the built-in tools): commands that add the
// configuration's tools add them to it, as each command of the binary adds them once.
func runOwn(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	reg := &quiver.Registry{}
	if err := reg.Register(quiver.Default.Tools()...); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	a := &app{registry: reg, stdin: strings.NewReader(stdin), stdout: &stdout, stderr: &stderr}
	code := a.run(context.Background(), args)
	return code, stdout.String(), stderr.String()
}

// TestImportOpenAPIOfQuiverItself: quiver serve's own /v1 document, imported by the CLI, makes
// tools that call that server with its API key, read from a secret variable and never shown.
func TestImportOpenAPIOfQuiverItself(t *testing.T) {
	endpoint, _, stderr := startServeWith(t)
	key := firstKeyRE.FindString(stderr.String())
	base := strings.TrimSuffix(endpoint, "/mcp")
	// The CLI works on a data directory of its own: the server holds its database.
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	code, out, errOut := runCLI(t, "", "tools", "import-openapi", base+"/v1/openapi.json", "--name", "quiver", "--server", base,
		"--operations", "get-session,call-tool")
	if code != exitOK || !strings.Contains(out, "quiver.get-session") || !strings.Contains(out, "quiver.call-tool") ||
		!strings.Contains(out, "QUIVER_APIKEY") {
		t.Fatalf("import: exit %d\n%s\n%s", code, out, errOut)
	}
	if code, out, errOut := runCLI(t, key, "vars", "set", "QUIVER_APIKEY", "--secret"); code != exitOK {
		t.Fatalf("vars set: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = runOwn(t, "", "call", "quiver.get-session")
	if code != exitOK || !strings.Contains(out, `"role": "admin"`) || strings.Contains(out+errOut, key) {
		t.Fatalf("get-session: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = runOwn(t, "", "call", "quiver.call-tool", "--args", `{"name":"get_current_time","body":{"args":{"timezone":"Asia/Tokyo"}}}`)
	if code != exitOK || !strings.Contains(out, `"timezone": "Asia/Tokyo"`) {
		t.Fatalf("call-tool: exit %d\n%s\n%s", code, out, errOut)
	}
	// Without the key the server refuses, and the call says so.
	if code, out, errOut := runCLI(t, "", "vars", "unset", "QUIVER_APIKEY"); code != exitOK {
		t.Fatalf("vars unset: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, _ = runOwn(t, "", "call", "quiver.get-session")
	if code != exitError || !strings.Contains(out, "QUIVER_APIKEY") {
		t.Fatalf("get-session without the key: exit %d\n%s", code, out)
	}
}

// TestImportOpenAPIFile: a document nobody here wrote, from a file, added to a configuration
// that already has content (kept, comments included), listed and called; imported again it
// replaces its entry; --dry-run writes nothing; mistakes are usage errors or clear failures.
func TestImportOpenAPIFile(t *testing.T) {
	pets := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodPost && r.URL.Path == "/api/pets" {
			var pet map[string]any
			json.NewDecoder(r.Body).Decode(&pet)
			pet["id"] = 7
			json.NewEncoder(w).Encode(pet)
			return
		}
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte(`{"code":404,"message":"not here"}`))
	}))
	defer pets.Close()
	dir := t.TempDir()
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	cfg := filepath.Join(dir, "quiver.yaml")
	t.Setenv(configEnv, cfg)
	const kept = "# the team's remote servers\nmcp:\n  servers: []\n"
	if err := os.WriteFile(cfg, []byte(kept), 0o600); err != nil {
		t.Fatal(err)
	}
	doc := filepath.Join("..", "..", "openapi", "testdata", "petstore-expanded.yaml")
	code, out, errOut := runCLI(t, "", "tools", "import-openapi", doc, "--name", "pets", "--server", pets.URL+"/api", "--dry-run")
	if code != exitOK || !strings.Contains(out, "4 tools") || strings.Contains(out, "added") {
		t.Fatalf("dry run: exit %d\n%s\n%s", code, out, errOut)
	}
	if b, _ := os.ReadFile(cfg); string(b) != kept {
		t.Fatalf("--dry-run changed the configuration:\n%s", b)
	}
	for range 2 {
		code, out, errOut = runCLI(t, "", "tools", "import-openapi", doc, "--name", "pets", "--server", pets.URL+"/api")
		if code != exitOK {
			t.Fatalf("import: exit %d\n%s\n%s", code, out, errOut)
		}
	}
	b, _ := os.ReadFile(cfg)
	if !strings.HasPrefix(string(b), "# the team's remote servers\nmcp:") || strings.Count(string(b), "name: pets") != 1 ||
		!strings.Contains(out, "replaced in") {
		t.Fatalf("configuration after two imports:\n%s\n%s", b, out)
	}
	code, out, errOut = runOwn(t, "", "tools", "list")
	if code != exitOK || !strings.Contains(out, "pets.addPet") || !strings.Contains(out, "[not read-only, open world]") {
		t.Fatalf("tools list: exit %d\n%s\n%s", code, out, errOut)
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "pets.deletePet ") && !strings.HasSuffix(l, "[not read-only, destructive, idempotent, open world]") {
			t.Errorf("deletePet's hints: %s", l)
		}
	}
	code, out, errOut = runOwn(t, "", "tools", "list", "--json")
	if code != exitOK || !strings.Contains(out, `"readOnlyHint": true`) || !strings.Contains(out, `"destructiveHint": true`) {
		t.Fatalf("tools list --json: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = runOwn(t, "", "call", "pets.addPet", "--args", `{"body":{"name":"Rex"}}`)
	if code != exitOK || !strings.Contains(out, `"id": 7`) {
		t.Fatalf("call: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, _ = runOwn(t, "", "call", "pets.find_pet_by_id", "--args", `{"id":1}`)
	if code != exitError || !strings.Contains(out, "404 Not Found") {
		t.Fatalf("a 404 is an error result: exit %d\n%s", code, out)
	}
	swagger := filepath.Join(dir, "swagger.json")
	if err := os.WriteFile(swagger, []byte(`{"swagger":"2.0","info":{"title":"t","version":"1"},"paths":{}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	// 1,001 operations, tagged a (one) or b (the others), and no server.
	var many strings.Builder
	many.WriteString(`{"openapi":"3.0.3","info":{"title":"t","version":"1"},"paths":{`)
	for i := range 1001 {
		tag := "b"
		if i == 0 {
			tag = "a"
		}
		fmt.Fprintf(&many, `%s"/op%d":{"get":{"operationId":"op%d","tags":["%s"],"responses":{"200":{"description":"ok"}}}}`, map[bool]string{true: ",", false: ""}[i > 0], i, i, tag)
	}
	many.WriteString(`}}`)
	big := filepath.Join(dir, "big.json")
	if err := os.WriteFile(big, []byte(many.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no --name", []string{doc}, exitUsage, "needs --name"},
		{"no document", []string{"--name", "x"}, exitUsage, "needs the document"},
		{"a credential without a variable", []string{doc, "--name", "x", "--credential", "api_key"}, exitUsage, "SCHEME=VARIABLE"},
		{"a missing file", []string{filepath.Join(dir, "nope.yaml"), "--name", "x"}, exitError, "no such file"},
		{"a bad name", []string{doc, "--name", "a.b"}, exitError, "source name"},
		{"not OpenAPI", []string{swagger, "--name", "x"}, exitError, "only OpenAPI 3.0 and 3.1"},
		// Errors name the flags, not the configuration's fields.
		{"over the cap", []string{big, "--name", "x", "--dry-run"}, exitError,
			"select the ones to import with --operations (an operationId, tag:NAME or \"METHOD /path\" each), or raise the cap with --max-operations (at most 10000)"},
		{"the cap raised, no server", []string{big, "--name", "x", "--max-operations", "1001", "--dry-run"}, exitError,
			"the document names no server; give the base URL of the service with --server"},
		{"the cap raised", []string{big, "--name", "x", "--max-operations", "1001", "--server", "https://x.example", "--dry-run"}, exitOK, "1001 tools"},
		{"a selection", []string{big, "--name", "x", "--operations", "tag:a", "--server", "https://x.example", "--dry-run"}, exitOK, "1 tool:"},
		{"a selection over the cap", []string{big, "--name", "x", "--operations", "tag:b,op0", "--server", "https://x.example", "--dry-run"}, exitError,
			"the selection (--operations) matches more than 1000 operations"},
		{"a selection of nothing", []string{big, "--name", "x", "--operations", "tag:c", "--server", "https://x.example", "--dry-run"}, exitError,
			`no operation matches "tag:c" of --operations`},
		{"a cap past the most", []string{big, "--name", "x", "--max-operations", "10001"}, exitUsage, "--max-operations 10001: give 1 to 10000"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, "", append([]string{"tools", "import-openapi"}, tc.args...)...)
			if code != tc.code || !strings.Contains(out+errOut, tc.want) {
				t.Fatalf("exit %d, want %d and %q\n%s\n%s", code, tc.code, tc.want, out, errOut)
			}
		})
	}
}

// TestServeOffersOpenAPITools: quiver serve reads the configuration's openapi block and serves
// each operation over MCP, with the method's annotations; a call reaches the service.
func TestServeOffersOpenAPITools(t *testing.T) {
	pets := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`[{"id":1,"name":"Rex"}]`))
	}))
	defer pets.Close()
	doc, err := filepath.Abs(filepath.Join("..", "..", "openapi", "testdata", "petstore-expanded.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "quiver.yaml")
	entry := "openapi:\n  - {name: pets, document: " + doc + ", servers: ['" + pets.URL + "/api'], operations: [findPets, deletePet]}\n"
	if err := os.WriteFile(cfg, []byte(entry), 0o600); err != nil {
		t.Fatal(err)
	}
	endpoint, _, _ := startServe(t, "--config", cfg)
	cs := connectServe(t, endpoint)
	ctx := context.Background()
	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, tool := range list.Tools {
		switch tool.Name {
		case "pets.findPets":
			found[tool.Name] = tool.Annotations != nil && tool.Annotations.ReadOnlyHint
		case "pets.deletePet":
			found[tool.Name] = tool.Annotations != nil && tool.Annotations.DestructiveHint != nil && *tool.Annotations.DestructiveHint
		case "pets.addPet":
			t.Errorf("addPet was not selected but is served")
		}
	}
	if !found["pets.findPets"] || !found["pets.deletePet"] {
		t.Fatalf("served %v", found)
	}
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "pets.findPets", Arguments: map[string]any{"limit": 5}})
	if err != nil || res.IsError {
		t.Fatalf("call: %+v %v", res, err)
	}
	if text := res.Content[0].(*sdk.TextContent).Text; !strings.Contains(text, `"name":"Rex"`) {
		t.Fatalf("call answered %s", text)
	}
}

// TestServeImportsOpenAPIThroughTheAPI: a document imported over /v1 is the workspace's at
// once; its tools reach the internal hosts --openapi-internal-hosts names, and no other.
func TestServeImportsOpenAPIThroughTheAPI(t *testing.T) {
	pets := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"id":3,"name":"Tom"}`))
	}))
	defer pets.Close()
	doc, err := os.ReadFile(filepath.Join("..", "..", "openapi", "testdata", "petstore-expanded.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	endpoint, _, stderr := startServeWith(t, "--openapi-internal-hosts", "127.0.0.1")
	key := firstKeyRE.FindString(stderr.String())
	base := strings.TrimSuffix(endpoint, "/mcp")
	post := func(path string, body any) (int, string) {
		t.Helper()
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest(http.MethodPost, base+path, bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var out bytes.Buffer
		out.ReadFrom(res.Body)
		return res.StatusCode, out.String()
	}
	port := strings.TrimPrefix(pets.URL, "http://127.0.0.1")
	for name, server := range map[string]string{"pets": pets.URL, "local": "http://localhost" + port} {
		if code, out := post("/v1/openapi-sources", map[string]any{"name": name, "document": string(doc), "servers": []string{server + "/api"},
			"operations": []string{"find pet by id"}}); code != http.StatusCreated || !strings.Contains(out, name+".find_pet_by_id") {
			t.Fatalf("import %s: %d %s", name, code, out)
		}
	}
	if code, out := post("/v1/tools/pets.find_pet_by_id/call", map[string]any{"args": map[string]any{"id": 3}}); code != 200 || !strings.Contains(out, `"name":"Tom"`) {
		t.Fatalf("a call to the allowed host: %d %s", code, out)
	}
	if code, out := post("/v1/tools/local.find_pet_by_id/call", map[string]any{"args": map[string]any{"id": 3}}); code != 200 ||
		!strings.Contains(out, "the server localhost"+port+" is not allowed") || strings.Contains(out, "127.0.0.1") {
		t.Fatalf("a call to an internal host not allowed: %d %s", code, out)
	}
}
