package platform_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/platform"
)

// operationsDocument is an OpenAPI document of n operations, a path each, tagged "even" or
// "odd".
func operationsDocument(n int) string {
	var b strings.Builder
	b.WriteString(`{"openapi":"3.0.3","info":{"title":"t","version":"1"},"servers":[{"url":"https://h.example"}],"paths":{`)
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		tag := "even"
		if i%2 == 1 {
			tag = "odd"
		}
		fmt.Fprintf(&b, `"/op%d":{"get":{"operationId":"op%d","tags":["%s"],"responses":{"200":{"description":"ok"}}}}`, i, i, tag)
	}
	b.WriteString(`}}`)
	return b.String()
}

// TestConfiguredOperationsCap: max_operations in the configuration file's openapi block is the
// cap the document's import is held to, as serve, mcp stdio, run and apply build it: a document
// over it is refused in the cap's words, naming the file's settings (operations,
// max_operations) as the ways out; raised, it imports; out of range, the file is refused.
func TestConfiguredOperationsCap(t *testing.T) {
	doc := operationsDocument(1001)
	tests := []struct {
		name     string
		settings string   // the entry's settings beside name and document
		readErr  string   // the configuration is refused, saying this
		err      []string // the source is refused, saying these
		tools    int
	}{
		{"the default cap", "", "",
			[]string{"openapi big: ", "the document has more than 1000 operations", "select the ones to import with operations",
				"raise the cap with max_operations (at most 10000)"}, 0},
		{"a lower cap", "max_operations: 500", "", []string{"the document has more than 500 operations", "max_operations"}, 0},
		{"a selection over a lower cap", "max_operations: 500, operations: ['tag:even']", "",
			[]string{"the selection (operations) matches more than 500 operations"}, 0},
		{"a selection within it", "max_operations: 500, operations: ['tag:odd']", "", nil, 500},
		{"the cap raised", "max_operations: 1001", "", nil, 1001},
		{"past the most", "max_operations: 10001", "openapi[0] (big): max_operations 10001: give 0 (the default, 1000) to 10000", nil, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			entry := "name: big, document: big.json"
			if tc.settings != "" {
				entry += ", " + tc.settings
			}
			dir := writeConfigDir(t, map[string]string{"quiver.yaml": "openapi:\n  - {" + entry + "}\n", "big.json": doc})
			c, err := platform.ReadConfiguration(context.Background(), filepath.Join(dir, "quiver.yaml"))
			if tc.readErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.readErr) {
					t.Fatalf("reading the configuration: %v, want an error saying %q", err, tc.readErr)
				}
				return
			}
			must(t, err)
			built := platform.BuildSharedTools(context.Background(), c, &quiver.Registry{}, nil)
			if len(tc.err) == 0 {
				if built.Broken != nil || len(built.Tools) != tc.tools {
					t.Fatalf("%d tools (%v), want %d", len(built.Tools), built.Broken, tc.tools)
				}
				return
			}
			if built.Broken == nil {
				t.Fatalf("%d tools, want a refusal", len(built.Tools))
			}
			for _, want := range tc.err {
				if !strings.Contains(built.Broken.Error(), want) {
					t.Errorf("%q does not say %q", built.Broken, want)
				}
			}
		})
	}
}
