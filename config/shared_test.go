package config_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/quiverhq/quiver/config"
)

// The shared part of a file is the same whatever its comments, key order and quoting, keeps
// ${VAR} as written (each node expands its own), leaves the oidc block out, and reads back as
// the same configuration, governance included.
func TestShared(t *testing.T) {
	one := `# the fleet's tools
mcp:
  servers:
    - name: search
      url: https://mcp.example.com/mcp
      headers: {Authorization: "Bearer ${SEARCH_TOKEN}"}
openapi:
  - name: petstore
    document: petstore.yaml
    timeout: 30s
    requires_confirmation: true
a2a:
  agents:
    - {name: weather, url: "https://agents.example.com/weather", timeout: 5m}
governance:
  - tools: ["*"]
    timeout: 2m
oidc:
  issuer: https://id.example.com/
  rules: []
`
	two := `governance: [{timeout: 2m, tools: ['*']}]
a2a: {agents: [{url: https://agents.example.com/weather, name: weather, timeout: 5m}]}
openapi: [{requires_confirmation: true, timeout: 30s, document: petstore.yaml, name: petstore}]
mcp: {servers: [{headers: {Authorization: 'Bearer ${SEARCH_TOKEN}'}, url: 'https://mcp.example.com/mcp', name: search}]}
`
	t.Setenv("SEARCH_TOKEN", "secret-token")
	var shared [][]byte
	for _, doc := range []string{one, two} {
		f, err := config.Parse(strings.NewReader(doc), "quiver.yaml")
		if err != nil {
			t.Fatal(err)
		}
		s, err := f.Shared()
		if err != nil {
			t.Fatal(err)
		}
		shared = append(shared, s)
	}
	if !bytes.Equal(shared[0], shared[1]) {
		t.Fatalf("the same configuration written twice is shared differently:\n%s\n%s", shared[0], shared[1])
	}
	s := string(shared[0])
	if strings.Contains(s, "secret-token") || !strings.Contains(s, "${SEARCH_TOKEN}") || strings.Contains(s, "oidc") {
		t.Fatalf("shared:\n%s\nwant ${SEARCH_TOKEN} as written and no oidc block", s)
	}
	back, err := config.ParseShared(shared[0], "version 1")
	if err != nil {
		t.Fatal(err)
	}
	again, _ := back.Shared()
	if !bytes.Equal(again, shared[0]) {
		t.Fatalf("read back and shared again:\n%s\nwant\n%s", again, shared[0])
	}
	rules, err := back.Rules()
	if err != nil || len(rules) != 2 {
		t.Fatalf("the rules read back: %v %v, want the governance block's and petstore's confirmation", rules, err)
	}
	if src := back.OpenAPI[0].Source([]byte("{}")); src.Timeout.String() != "30s" || src.Location != "petstore.yaml" {
		t.Fatalf("the source: %+v", src)
	}
	if empty, err := (&config.File{OIDC: &config.OIDC{Issuer: "https://id.example.com/"}}).Shared(); err != nil || empty != nil {
		t.Fatalf("a file of an oidc block only shares %q %v, want nothing", empty, err)
	}
}
