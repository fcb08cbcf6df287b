package openapi_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/quiverhq/quiver/openapi"
)

// taggedOperations is a document of n operations, a path each, tagged "even" or "odd", as JSON
// or as YAML.
func taggedOperations(n int, yaml bool) []byte {
	var b strings.Builder
	if yaml {
		b.WriteString("openapi: 3.0.3\ninfo: {title: t, version: '1'}\nservers: [{url: 'https://h.example'}]\npaths:\n")
		for i := range n {
			fmt.Fprintf(&b, "  /op%d:\n    get:\n      operationId: op%d\n      tags: [%s]\n      responses: {'200': {description: ok}}\n", i, i, parity(i))
		}
		return []byte(b.String())
	}
	b.WriteString(`{"openapi":"3.0.3","info":{"title":"t","version":"1"},"servers":[{"url":"https://h.example"}],"paths":{`)
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"/op%d":{"get":{"operationId":"op%d","tags":["%s"],"responses":{"200":{"description":"ok"}}}}`, i, i, parity(i))
	}
	b.WriteString(`}}`)
	return []byte(b.String())
}

func parity(i int) string {
	if i%2 == 0 {
		return "even"
	}
	return "odd"
}

// TestOperationsCap: a document, or a selection, of more operations than the source's cap is
// refused as its text is counted, before the loader reads it (a few megabytes at most), with
// both ways out named as the door names them; raising the cap or selecting fewer imports it.
// Before, 1,223 operations were refused once every one was loaded (686 MB, 19 s of CPU for
// GitHub's description). JSON is counted token by token (1.3 MB for these 2,001 operations,
// 197 KB of text); YAML on the parser's node tree, the one price paid before it can be refused
// (6.5 MB for 215 KB), where importing either document costs over 50 MB.
func TestOperationsCap(t *testing.T) {
	const mb = 1 << 20
	flags := openapi.Settings{Servers: "--server", Operations: "--operations", MaxOperations: "--max-operations"}
	tests := []struct {
		name  string
		src   openapi.Source
		yaml  bool
		err   []string // what the refusal says; none for an import
		tools int
	}{
		{"over the cap", openapi.Source{}, false,
			[]string{"the document has more than 1000 operations", "select the ones to import with operations", "raise the cap with max_operations (at most 10000)"}, 0},
		{"over the cap, in YAML", openapi.Source{}, true,
			[]string{"the document has more than 1000 operations", "select the ones to import with operations", "raise the cap with max_operations (at most 10000)"}, 0},
		{"over the cap, named as a command line's flags", openapi.Source{Settings: flags}, false,
			[]string{"select the ones to import with --operations", "raise the cap with --max-operations"}, 0},
		{"a selection over the cap", openapi.Source{Operations: []string{"tag:even", "op1", "op3"}}, false,
			[]string{"the selection (operations) matches more than 1000 operations"}, 0},
		{"a selection over the cap, in YAML", openapi.Source{Operations: []string{"tag:even", "GET /op1", "op3"}}, true,
			[]string{"the selection (operations) matches more than 1000 operations"}, 0},
		{"a selection within the cap", openapi.Source{Operations: []string{"tag:odd"}}, false, nil, 1000},
		{"a selection within the cap, in YAML", openapi.Source{Operations: []string{"tag:odd"}}, true, nil, 1000},
		{"the cap raised", openapi.Source{MaxOperations: 2001}, false, nil, 2001},
		{"the cap raised past the most", openapi.Source{MaxOperations: 1 << 30, Operations: []string{"tag:even"}}, false, nil, 1001},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := tc.src
			src.Name, src.Document = "cap", taggedOperations(2001, tc.yaml)
			var im *openapi.Import
			var err error
			n := allocated(func() { im, err = openapi.Tools(context.Background(), src) })
			if len(tc.err) == 0 {
				if err != nil || len(im.Tools) != tc.tools {
					t.Fatalf("%v; want %d tools", err, tc.tools)
				}
				return
			}
			if err == nil {
				t.Fatalf("%d tools, want a refusal", len(im.Tools))
			}
			for _, want := range tc.err {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			limit := uint64(4 * mb)
			if tc.yaml {
				limit = 16 * mb
			}
			if n > limit {
				t.Errorf("the refusal allocated %d bytes, more than %d: the document was read past its count", n, limit)
			}
		})
	}
}
