package config_test

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/config"
)

// docBlocks returns the text of every block of md fenced as ```lang.
func docBlocks(md, lang string) []string {
	var blocks []string
	var b strings.Builder
	in := false
	for line := range strings.Lines(md) {
		switch {
		case !in && strings.TrimSpace(line) == "```"+lang:
			in = true
			b.Reset()
		case in && strings.TrimSpace(line) == "```":
			in = false
			blocks = append(blocks, b.String())
		case in:
			b.WriteString(line)
		}
	}
	return blocks
}

// docs/GOVERNANCE.md's examples are what Quiver reads: every YAML block is a configuration
// file that parses (as quiver serve reads one) and gives governance rules, and every JSON
// block is a PUT /v1/governance body whose rules a workspace may set.
func TestGovernanceDocExamples(t *testing.T) {
	md, err := os.ReadFile("../docs/GOVERNANCE.md")
	if err != nil {
		t.Fatal(err)
	}
	yamls := docBlocks(string(md), "yaml")
	if len(yamls) < 4 {
		t.Fatalf("docs/GOVERNANCE.md has %d YAML blocks, want one per source and one across them", len(yamls))
	}
	for i, block := range yamls {
		t.Run(fmt.Sprintf("yaml block %d", i+1), func(t *testing.T) {
			f, err := config.Parse(strings.NewReader(block), fmt.Sprintf("docs/GOVERNANCE.md, YAML block %d", i+1))
			if err != nil {
				t.Fatalf("%v\n%s", err, block)
			}
			rules, err := f.Rules()
			if err != nil || len(rules) == 0 {
				t.Fatalf("rules %v, %v: the example sets none\n%s", rules, err, block)
			}
		})
	}
	bodies := docBlocks(string(md), "json")
	if len(bodies) == 0 {
		t.Fatal("docs/GOVERNANCE.md shows no PUT /v1/governance body")
	}
	for i, block := range bodies {
		var body struct {
			Version *int64        `json:"version"`
			Rules   []quiver.Rule `json:"rules"`
		}
		dec := json.NewDecoder(strings.NewReader(block))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&body); err != nil || body.Version == nil || len(body.Rules) == 0 {
			t.Errorf("JSON block %d is not a body with a version and rules (%v):\n%s", i+1, err, block)
			continue
		}
		if _, err := quiver.NewGovernance(nil, body.Rules); err != nil {
			t.Errorf("JSON block %d: a workspace may not set these rules: %v", i+1, err)
		}
	}
}
