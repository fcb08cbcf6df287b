package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/server"
)

// repoRoot is the repository's root, from this package's folder.
const repoRoot = "../../.."

// baseDocument is a small API of one operation: a request body with two required properties
// and an answer with two.
const baseDocument = `{"openapi": "3.1.0", "info": {"title": "t", "version": "1.0.0"},
 "paths": {"/v1/threads/{id}/runs": {"post": {"operationId": "run",
  "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}},
   {"name": "wait", "in": "query", "required": true, "schema": {"type": "boolean"}}],
  "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/RunInputBody"}}}},
  "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Run"}}}}}}}},
 "components": {"schemas": {
  "RunInputBody": {"type": "object", "required": ["agent", "message"], "properties": {"agent": {"type": "string"}, "message": {"type": "string"}}},
  "Run": {"type": "object", "required": ["id", "status"], "properties": {"id": {"type": "string"}, "status": {"type": "string"}}}}}}`

// changed returns baseDocument with edit applied to its decoded form.
func changed(t *testing.T, edit func(doc map[string]any)) string {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal([]byte(baseDocument), &doc); err != nil {
		t.Fatal(err)
	}
	edit(doc)
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// schemaOf is the named component schema of doc.
func schemaOf(doc map[string]any, name string) map[string]any {
	return doc["components"].(map[string]any)["schemas"].(map[string]any)[name].(map[string]any)
}

// operation is the one operation of baseDocument in doc.
func operation(doc map[string]any) map[string]any {
	return doc["paths"].(map[string]any)["/v1/threads/{id}/runs"].(map[string]any)["post"].(map[string]any)
}

const recorded = "- In POST /v1/threads/{id}/runs the request property `agent` became optional: a default agent runs.\n"

// The API check (.ci/api-compat, which .ci/run runs on the served document against
// api/openapi-release.json) passes a document that keeps the old one's clients working and
// fails one that breaks them, a required field made optional in a request body (which broke
// the Go client oapi-codegen generated: issue 47) or in an answer, unless the change is
// written in the Unreleased section of the changelog; and refuses, as such, input it cannot
// use.
func TestAPICompatibilityCheck(t *testing.T) {
	requestOptional := changed(t, func(d map[string]any) { schemaOf(d, "RunInputBody")["required"] = []string{"message"} })
	cases := []struct {
		name, revision, changelog string
		code                      int
		says                      string
	}{
		{"the same document", baseDocument, "", 0, "keeps every client"},
		{"an operation and an optional property added", changed(t, func(d map[string]any) {
			schemaOf(d, "RunInputBody")["properties"].(map[string]any)["tags"] = map[string]any{"type": "array", "items": map[string]any{"type": "string"}}
			schemaOf(d, "Run")["properties"].(map[string]any)["error"] = map[string]any{"type": "string"}
			d["paths"].(map[string]any)["/v1/health"] = map[string]any{"get": map[string]any{"operationId": "health",
				"responses": map[string]any{"200": map[string]any{"description": "ok"}}}}
		}), "", 0, "keeps every client"},
		{"a required request property made optional", requestOptional, "", 1, "the request property `agent` became optional"},
		{"a required answer property made optional", changed(t, func(d map[string]any) { schemaOf(d, "Run")["required"] = []string{"id"} }),
			"", 1, "the response property `status` became optional"},
		{"a required query parameter made optional", changed(t, func(d map[string]any) {
			operation(d)["parameters"].([]any)[1].(map[string]any)["required"] = false
		}), "", 1, "request parameter `wait` became optional"},
		{"a request property made nullable", changed(t, func(d map[string]any) {
			schemaOf(d, "RunInputBody")["properties"].(map[string]any)["message"] = map[string]any{"type": []string{"string", "null"}}
		}), "", 1, "breaks clients"},
		{"an operation removed", changed(t, func(d map[string]any) { d["paths"] = map[string]any{} }), "", 1, "API path removed"},
		{"the change written under Unreleased", requestOptional, "### Changed\n" + recorded, 0, "keeps every client"},
		{"the change written under the last release only", requestOptional, "\n## [0.1.0] - 2026-11-29\n\n### Changed\n" + recorded, 1, "became optional"},
		{"another change written", requestOptional, "### Changed\n- In POST /v1/threads/{id}/runs the request property `message` became optional.\n", 1, "`agent` became optional"},
		{"a revision that is not a document", `{"openapi": "3.1.0", "info": `, "", 2, "could not compare"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			changelog := "# Changelog\n\n## [Unreleased]\n\n" + c.changelog
			if !strings.Contains(c.changelog, "## [0.1.0]") {
				changelog += "\n## [0.1.0] - 2026-11-29\n"
			}
			code, out := runCheck(t, dir, c.revision, changelog)
			if code != c.code || !strings.Contains(out, c.says) {
				t.Errorf("exit %d, want %d saying %q:\n%s", code, c.code, c.says, out)
			}
		})
	}
	t.Run("a changelog without Unreleased", func(t *testing.T) {
		code, out := runCheck(t, t.TempDir(), requestOptional, "# Changelog\n\n## [0.1.0] - 2026-11-29\n"+recorded)
		if code != 2 || !strings.Contains(out, `no "## [Unreleased]" section`) {
			t.Errorf("exit %d:\n%s", code, out)
		}
	})
}

// runCheck runs .ci/api-compat on baseDocument and revision with changelog, all written to dir,
// and returns its exit status and output.
func runCheck(t *testing.T, dir, revision, changelog string) (int, string) {
	t.Helper()
	files := map[string]string{"base.json": baseDocument, "revision.json": revision, "CHANGELOG.md": changelog}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("bash", filepath.Join(repoRoot, ".ci", "api-compat"),
		filepath.Join(dir, "base.json"), filepath.Join(dir, "revision.json"), filepath.Join(dir, "CHANGELOG.md"))
	out, err := cmd.CombinedOutput()
	if exit, ok := err.(*exec.ExitError); ok {
		return exit.ExitCode(), string(out)
	} else if err != nil {
		t.Fatal(err)
	}
	return 0, string(out)
}

// The version is one constant: the served document's info.version, the committed document of
// the last release's and the newest release of CHANGELOG.md are quiver.Version (which quiver
// version prints).
func TestOneVersion(t *testing.T) {
	served, err := server.OpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	release, err := os.ReadFile(filepath.Join(repoRoot, "api", "openapi-release.json"))
	if err != nil {
		t.Fatal(err)
	}
	for name, doc := range map[string][]byte{"the served document": served, "api/openapi-release.json": release} {
		var d struct{ Info struct{ Version string } }
		if err := json.Unmarshal(doc, &d); err != nil || d.Info.Version != quiver.Version {
			t.Errorf("%s: info.version %q (%v), want quiver.Version %q", name, d.Info.Version, err, quiver.Version)
		}
	}
	changelog, err := os.ReadFile(filepath.Join(repoRoot, "CHANGELOG.md"))
	if err != nil {
		t.Fatal(err)
	}
	headings := regexp.MustCompile(`(?m)^## \[([^\]]+)\]`).FindAllStringSubmatch(string(changelog), 2)
	if len(headings) != 2 || headings[0][1] != "Unreleased" || headings[1][1] != quiver.Version {
		t.Errorf("CHANGELOG.md's first sections are %v, want Unreleased then %s", headings, quiver.Version)
	}
}
