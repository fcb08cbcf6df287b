package config_test

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/config"
	"github.com/quiverhq/quiver/platform/connect"
	"github.com/quiverhq/quiver/server"
)

// docs/guides/connections.md's examples are what Quiver reads and answers: its providers
// document decodes strictly and checks, its configuration maps a scheme to a provider, and its
// 403 is the API's problem, with the words a call says.
func TestConnectionsGuideExamples(t *testing.T) {
	md, err := os.ReadFile("../docs/guides/connections.md")
	if err != nil {
		t.Fatal(err)
	}
	var docs, problems int
	for _, block := range docBlocks(string(md), "json") {
		switch {
		case strings.Contains(block, `"providers"`):
			docs++
			d, err := connect.Decode([]byte(block))
			if err != nil || len(d.Providers) != 2 {
				t.Fatalf("the guide's providers: %v", err)
			}
		case strings.Contains(block, `"authorization_required"`):
			problems++
			var p server.AuthorizationProblem
			dec := json.NewDecoder(bytes.NewReader([]byte(block)))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&p); err != nil {
				t.Fatalf("the guide's problem: %v", err)
			}
			want := (&quiver.AuthorizationRequiredError{Provider: p.Provider, Scopes: p.Scopes, URL: p.AuthorizationURL}).Error()
			if p.Detail != want || p.Status != 403 {
				t.Errorf("the guide's problem says %q, a call says %q", p.Detail, want)
			}
		}
	}
	if docs != 1 || problems != 1 {
		t.Fatalf("found %d providers documents and %d problems", docs, problems)
	}
	var sources, blocks, imports int
	for _, block := range docBlocks(string(md), "yaml") {
		f, err := config.Parse(strings.NewReader(block), "connections.md")
		switch {
		case err != nil:
			t.Fatalf("the guide's configuration: %v\n%s", err, block)
		case len(f.OpenAPI) == 1 && f.OpenAPI[0].Connections["oauth"].Provider == "acme":
			sources++
		case f.Connections != nil && len(f.Connections.Providers) == 1 && f.Connections.Providers[0].ClientSecretVariable == "ACME_CLIENT_SECRET":
			blocks++
		case len(f.MCP.Servers) == 1 && f.MCP.Servers[0].Connection != nil && len(f.A2A.Agents) == 1 && f.A2A.Agents[0].Connection != nil:
			remotes, err := f.Remotes()
			if err != nil || remotes[0].Connection.Provider != "acme" {
				t.Fatalf("the guide's remote MCP server: %v", err)
			}
			agents, err := f.A2ARemotes()
			if err != nil || agents[0].Connection.Provider != "acme" {
				t.Fatalf("the guide's A2A agent: %v", err)
			}
			imports++
		default:
			t.Errorf("a configuration of the guide shows neither a source nor providers:\n%s", block)
		}
	}
	if sources != 1 || blocks != 1 || imports != 1 {
		t.Errorf("found %d sources, %d providers blocks and %d imports", sources, blocks, imports)
	}
}
