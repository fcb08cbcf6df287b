package agent_test

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"github.com/quiverhq/quiver/agent"
)

// The same definitions written twice, in YAML with comments and camelCase, and in JSON with
// other key order, read as the same canonical definitions; a file of no definition is skipped;
// the definitions load into the catalog LoadDir makes of the directory.
func TestReadDefinitionsCanonical(t *testing.T) {
	yamlDir := writeFiles(t, map[string]string{
		"triage.yaml":    "# the front door\nname: triage\nsystem: Sort the request.\ntools: [summarize]\nexposeAsTool: true\n",
		"summarize.yaml": "kind: prompt\nname: summarize\nsystem: Summarize.\nexpose_as_tool: true\n",
		"script.yaml":    "turns:\n  - text: hi\n",
	})
	jsonDir := writeFiles(t, map[string]string{
		"a.json": `{"expose_as_tool": true, "tools": ["summarize"], "system": "Sort the request.", "name": "triage"}`,
		"b.json": `{"system": "Summarize.", "name": "summarize", "kind": "prompt", "expose_as_tool": true}`,
	})
	fromYAML, skipped, err := agent.ReadDefinitions(yamlDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(skipped) != 1 {
		t.Fatalf("skipped %v, want the script", skipped)
	}
	fromJSON, _, err := agent.ReadDefinitions(jsonDir)
	if err != nil {
		t.Fatal(err)
	}
	same := slices.EqualFunc(fromYAML, fromJSON, func(a, b agent.Definition) bool {
		return a.Kind == b.Kind && a.Name == b.Name && bytes.Equal(a.JSON, b.JSON)
	})
	if !same || len(fromYAML) != 2 || fromYAML[0].Kind != "agent" || fromYAML[1].Kind != "prompt" {
		t.Fatalf("the YAML and the JSON definitions differ:\n%+v\n%+v", fromYAML, fromJSON)
	}
	c, err := agent.LoadDefinitions(fromYAML, "version 1")
	if err != nil {
		t.Fatal(err)
	}
	if a, ok := c.Agent("triage"); !ok || !a.ExposeAsTool || c.Prompts["summarize"] == nil {
		t.Fatalf("the catalog: %v %v", c.Names(), c.Prompts)
	}
}

func TestLoadDefinitionsRefuses(t *testing.T) {
	d, err := agent.CanonicalDefinition([]byte("name: broken\nprompt: missing\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := agent.LoadDefinitions([]agent.Definition{d}, "version 2"); !errors.Is(err, agent.ErrDefinition) {
		t.Fatalf("an agent naming a prompt not there: %v, want ErrDefinition", err)
	}
	if _, err := agent.CanonicalDefinition([]byte("turns: []\n")); !errors.Is(err, agent.ErrNotDefinition) {
		t.Fatalf("a script: %v, want ErrNotDefinition", err)
	}
	if _, err := agent.CanonicalDefinition([]byte("system: no name\n")); err == nil {
		t.Fatal("a definition without a name was read")
	}
}
