package agent_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/agent"
)

func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestLoadDir(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"researcher.yaml": `
name: researcher
description: Finds facts.
model: openai:gpt-4.1-mini
system: |
  You research.
tools: [echo, "github.*"]
deny: [github.delete_repo]
variables:
  - name: REGION
    type: text
    required: true
    description: Where to look.
output:
  type: object
  properties:
    answer: {type: string}
  required: [answer]
stop:
  max_steps: 7
  tools: [echo]
strict: true
temperature: 0.2
`,
		"summarize.yml": `
kind: prompt
name: summarize
system: Summarize.
tools: []
`,
		"summarizer.json": `{"name": "summarizer", "prompt": "summarize", "description": "Summaries."}`,
		"notes.txt":       "not a definition",
		// A scripted model's script kept beside its agent has none of a definition's fields:
		// it is skipped, not an error that stops the server.
		"script.yaml": "turns:\n  - text: hello\n",
	})
	c, err := agent.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.Names(), ","); got != "researcher,summarizer" {
		t.Fatalf("agents %s", got)
	}
	if len(c.Skipped) != 1 || filepath.Base(c.Skipped[0]) != "script.yaml" {
		t.Errorf("skipped %v, want script.yaml", c.Skipped)
	}
	// A file with a name is a definition: a field it should not have is an error naming both.
	bad := writeFiles(t, map[string]string{"helper.yaml": "name: helper\nsystem: Help.\nturns: []\n"})
	if _, err := agent.LoadDir(bad); err == nil || !strings.Contains(err.Error(), "helper.yaml") || !strings.Contains(err.Error(), "turns") {
		t.Errorf("a definition with an unknown field: %v, want an error naming the file and the field", err)
	}
	r, _ := c.Agent("researcher")
	p := r.Prompt
	if p.Model != "openai:gpt-4.1-mini" || p.System != "You research.\n" || len(p.Tools) != 2 || p.Deny[0] != "github.delete_repo" ||
		p.Stop.MaxSteps != 7 || !p.Strict || *p.Temperature != 0.2 || p.Output == nil || p.Output.Properties["answer"].Type != "string" {
		t.Fatalf("researcher %+v", p)
	}
	if len(p.Variables) != 1 || p.Variables[0].Name != "REGION" || !p.Variables[0].Required || p.Variables[0].Type != quiver.VarText {
		t.Fatalf("variables %+v", p.Variables)
	}
	s, _ := c.Agent("summarizer")
	if s.Prompt != c.Prompts["summarize"] || s.Description != "Summaries." {
		t.Fatalf("summarizer %+v", s)
	}
}

func TestLoadErrorsSayWhatAndWhere(t *testing.T) {
	cases := []struct {
		name  string
		files map[string]string
		want  []string
	}{
		{"unknown field", map[string]string{"a.yaml": "name: a\nsytem: typo\n"}, []string{"a.yaml", `unknown field "sytem"`, "system"}},
		{"not a mapping", map[string]string{"a.yaml": "- a\n- b\n"}, []string{"a.yaml", "want a mapping"}},
		{"bad yaml", map[string]string{"a.yaml": "name: [unclosed\n"}, []string{"a.yaml"}},
		{"empty", map[string]string{"a.yaml": ""}, []string{"a.yaml", "empty"}},
		{"no name", map[string]string{"a.yaml": "system: hi\n"}, []string{"a.yaml", "needs a name"}},
		{"duplicate agent", map[string]string{"a.yaml": "name: x\n", "b.yaml": "name: x\n"}, []string{"second agent", `"x"`}},
		{"unknown kind", map[string]string{"a.yaml": "kind: robot\nname: x\n"}, []string{`kind "robot"`, "agent or prompt"}},
		{"missing prompt", map[string]string{"a.yaml": "name: x\nprompt: nope\n"}, []string{`names prompt "nope"`}},
		{"prompt and inline fields", map[string]string{"p.yaml": "kind: prompt\nname: p\n", "a.yaml": "name: x\nprompt: p\nsystem: also\n"},
			[]string{"do one or the other"}},
		{"bad output schema", map[string]string{"a.yaml": "name: x\noutput: {type: 5}\n"}, []string{"a.yaml", "output"}},
		{"bad pattern", map[string]string{"a.yaml": "name: x\ntools: [\"[\"]\n"}, []string{"bad pattern"}},
		{"negative steps", map[string]string{"a.yaml": "name: x\nstop: {max_steps: -1}\n"}, []string{"max_steps -1"}},
		{"stop tool not bound", map[string]string{"a.yaml": "name: x\ntools: [a]\nstop: {tools: [b]}\n"}, []string{`stop tool "b"`}},
		{"variable without name", map[string]string{"a.yaml": "name: x\nvariables: [{type: text}]\n"}, []string{"variable"}},
		{"unknown meta-field", map[string]string{"a.yaml": "name: x\nmeta_fields: [_outputpath]\n"}, []string{"a.yaml", `unknown meta-field "_outputpath"`, "_outputPath, _instance, _delegate"}},
		{"meta-field twice", map[string]string{"a.yaml": "name: x\nmeta_fields: [_instance, _instance]\n"}, []string{"listed twice"}},
		{"bad instance name", map[string]string{"a.yaml": "name: x\ninstances: [\"east wing\"]\n"}, []string{"a.yaml", `instance name "east wing"`, "[A-Za-z0-9_-]"}},
		{"instance twice", map[string]string{"a.yaml": "name: x\ninstances: [a, a]\n"}, []string{`instance "a" is listed twice`}},
		{"too many instances", map[string]string{"a.yaml": "name: x\ninstances: [a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q]\n"}, []string{"17 instances, over the limit of 16"}},
		{"variable in variables and tenvs", map[string]string{"a.yaml": "name: x\nvariables: [{name: K}]\ntenvs: {type: object, properties: {K: {type: string}}}\n"},
			[]string{"a.yaml", "K is declared in both"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := agent.LoadDir(writeFiles(t, c.files))
			if err == nil {
				t.Fatal("loaded")
			}
			if !errors.Is(err, agent.ErrDefinition) && c.name != "bad yaml" {
				t.Errorf("error %v is not ErrDefinition", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
	if _, err := agent.LoadDir(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("a missing directory loaded")
	}
}

func TestLoadFile(t *testing.T) {
	dir := writeFiles(t, map[string]string{"one.yaml": "name: solo\ntools: [echo]\n"})
	c, err := agent.LoadFile(filepath.Join(dir, "one.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if a, ok := c.Agent("solo"); !ok || a.Prompt.Tools[0] != "echo" {
		t.Fatalf("catalog %+v", c)
	}
}

// V6: agents and prompts take tenvs, as a list or an object schema, beside variables.
func TestLoadTenvs(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"p.yaml": `kind: prompt
name: search
system: Search.
tenvs:
  type: object
  properties:
    vectorStoreId: {type: string, description: Vector store to search}
    apiKey: {type: string, format: password}
  required: [vectorStoreId]
`,
		"a.yaml": `name: researcher
system: Research.
variables: [{name: REGION, required: true}]
tenvs: [{name: TOKEN, type: secret}]
`,
	})
	c, err := agent.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	p := c.Prompts["search"]
	// A YAML mapping keeps no order once decoded: the properties come sorted by name.
	want := []quiver.Variable{
		{Name: "apiKey", Type: quiver.VarSecret},
		{Name: "vectorStoreId", Type: quiver.VarText, Required: true, Description: "Vector store to search"},
	}
	if len(p.Variables) != 2 || p.Variables[0] != want[0] || p.Variables[1] != want[1] {
		t.Fatalf("prompt variables %+v, want %+v", p.Variables, want)
	}
	a, _ := c.Agent("researcher")
	if got := a.Prompt.Variables; len(got) != 2 || got[0].Name != "REGION" || got[1].Name != "TOKEN" || got[1].Type != quiver.VarSecret {
		t.Fatalf("agent variables %+v", got)
	}
}
