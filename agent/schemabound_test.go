package agent_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/schema"
)

// refLattice is an object schema of depth definitions, each naming the next four times through
// anyOf: a few kilobytes that stand for 4^depth paths (security issue 45, break 1).
func refLattice(depth int) string {
	defs := map[string]any{fmt.Sprintf("d%d", depth): map[string]any{"type": "object"}}
	for i := range depth {
		ref := map[string]any{"$ref": fmt.Sprintf("#/$defs/d%d", i+1)}
		defs[fmt.Sprintf("d%d", i)] = map[string]any{"anyOf": []any{ref, ref, ref, ref}}
	}
	doc, _ := json.Marshal(map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{"$ref": "#/$defs/d0"}}, "$defs": defs})
	return string(doc)
}

// An agent definition file whose schemas stand for more work than the bounds allow is refused
// when it is loaded, naming the file, the field and the bound: the schemas are compiled once,
// each definition visited once, and refused before the paths are followed.
func TestLoadRefusesHostileSchemas(t *testing.T) {
	want := fmt.Sprintf("more than %d schema nodes to visit", schema.MaxSchemaVisits)
	cases := []struct {
		name, file, field string
	}{
		{"an agent's output", "name: lattice\noutput: " + refLattice(16) + "\n", "output"},
		{"a prompt's arguments", "kind: prompt\nname: lattice\nargs: " + refLattice(16) + "\n", "args"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := writeFiles(t, map[string]string{"lattice.yaml": c.file})
			_, err := agent.LoadFile(filepath.Join(dir, "lattice.yaml"))
			if err == nil {
				t.Fatal("loaded")
			}
			for _, w := range []string{"lattice.yaml", c.field, want} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}
