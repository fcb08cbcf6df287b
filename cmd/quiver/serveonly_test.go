package main

import (
	"go/parser"
	"go/token"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestOnlyServingImportsTheServer: the CLI is a door over the platform, and package server is
// the HTTP doors; so the command's files import server only to serve HTTP (quiver serve and
// its OpenID Connect flags). Every other command (call, mcp stdio, keys, tools, run, ...) gets
// what it needs from the platform and the packages below it.
func TestOnlyServingImportsTheServer(t *testing.T) {
	serving := []string{"serve.go", "serveoidc.go"}
	out, err := exec.Command("go", "list", "-f", `{{join .GoFiles "\n"}}`, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	var importers []string
	for _, name := range strings.Fields(string(out)) {
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			if path, _ := strconv.Unquote(imp.Path.Value); path == "github.com/quiverhq/quiver/server" {
				importers = append(importers, name)
			}
		}
	}
	for _, name := range importers {
		if !slices.Contains(serving, name) {
			t.Errorf("%s imports package server; only serving HTTP may (%v): take what it needs from the platform", name, serving)
		}
	}
	if !slices.Contains(importers, "serve.go") {
		t.Errorf("serve.go does not import package server (files importing it: %v): this test no longer looks where it should", importers)
	}
}
