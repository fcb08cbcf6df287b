package openapi_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/quiverhq/quiver/openapi"
)

// manyOperations is a document of n trivial operations, a path each: 40,000 make 3.2 MB of
// YAML or 3.4 MB of JSON.
func manyOperations(n int, yaml bool) []byte {
	var b strings.Builder
	if yaml {
		b.WriteString("openapi: 3.0.3\ninfo: {title: t, version: '1'}\nservers: [{url: 'https://h.example'}]\npaths:\n")
		for i := range n {
			fmt.Fprintf(&b, "  /op%d: {get: {operationId: op%d, responses: {'200': {description: ok}}}}\n", i, i)
		}
		return []byte(b.String())
	}
	b.WriteString(`{"openapi":"3.0.3","info":{"title":"t","version":"1"},"servers":[{"url":"https://h.example"}],"paths":{`)
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"/op%d":{"get":{"operationId":"op%d","responses":{"200":{"description":"ok"}}}}`, i, i)
	}
	b.WriteString(`}}`)
	return []byte(b.String())
}

// yamlDocument is a YAML document of one operation whose components' schemas are written as
// given (indented by four spaces).
func yamlDocument(schemas string) []byte {
	return []byte("openapi: 3.0.3\ninfo: {title: t, version: '1'}\nservers: [{url: 'https://h.example'}]\npaths:\n" +
		"  /a:\n    get:\n      operationId: a\n      responses: {'200': {description: ok}}\n" +
		"components:\n  schemas:\n" + schemas)
}

// laughs is the "billion laughs": each level an alias nine times over the one before, so that
// nine levels stand for 9^9 values in a few hundred bytes.
func laughs(levels int) []byte {
	var b strings.Builder
	b.WriteString("    L0: &l0 {type: string, description: lol}\n")
	for i := 1; i <= levels; i++ {
		fmt.Fprintf(&b, "    L%d: &l%d {allOf: [%s]}\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*l%d, ", i-1), 9), ", "))
	}
	return yamlDocument(b.String())
}

// emptySchemas is a JSON document of one operation and one component of n properties, each
// an empty schema: the values that cost the loader most, seven bytes each.
func emptySchemas(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"openapi":"3.0.3","info":{"title":"t","version":"1"},"servers":[{"url":"https://h.example"}],` +
		`"paths":{"/a":{"get":{"operationId":"a","responses":{"200":{"description":"ok"}}}}},"components":{"schemas":{"Big":{"type":"object","properties":{`)
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"p%d":{}`, i)
	}
	b.WriteString(`}}}}}`)
	return []byte(b.String())
}

// allocated is what f allocates, in bytes (the test's other goroutines idle meanwhile).
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestHostileDocuments: a document is counted as its text is read, before the loader builds
// anything of it, and one past the bounds is refused for about the price of that reading: many
// operations (selected or not), many values (a YAML alias counting as what it repeats), a
// YAML mapping of many members (the loader's YAML decoder compares every key of a mapping
// with every other: minutes of a core for 300,000), a YAML flow collection of many values
// (its parser holds their tokens, hundreds of bytes each, until the collection ends). Before
// these bounds the 40,000 operations cost 1.1 GB (JSON) or 290 MB (YAML) and the 842 bytes of
// the billion laughs took 7 GB in a minute, still growing.
func TestHostileDocuments(t *testing.T) {
	const mb = 1 << 20
	var members strings.Builder
	members.WriteString("    Wide:\n      type: object\n      properties:\n")
	for i := range openapi.MaxMappingMembers + 1 {
		fmt.Fprintf(&members, "        p%d: {}\n", i)
	}
	tests := []struct {
		name      string
		doc       []byte
		src       openapi.Source
		err       string // "" for a document that is read
		allocated uint64 // the most the refusal may allocate
	}{
		{"40,000 operations in JSON", manyOperations(40_000, false), openapi.Source{}, "the document has more than 1000 operations", 2 * mb},
		{"40,000 operations in JSON, the cap raised", manyOperations(40_000, false), openapi.Source{MaxOperations: 50_000}, "the document has more than 10000 operations", 32 * mb},
		{"40,000 operations in YAML", manyOperations(40_000, true), openapi.Source{MaxOperations: 10_000}, "the document has more than 10000 operations", 160 * mb},
		{"40,000 operations, one selected", manyOperations(40_000, false), openapi.Source{Operations: []string{"op1"}}, "the document has more than 10000 operations", 32 * mb},
		{"the billion laughs", laughs(9), openapi.Source{}, "the document has more than 1048576 values", 8 * mb},
		{"an alias repeating what holds it", yamlDocument("    Loop: &loop {type: object, properties: {self: *loop}}\n"), openapi.Source{},
			"an alias of the document repeats a node that holds it", 8 * mb},
		{"a YAML mapping of more members than allowed", yamlDocument(members.String()), openapi.Source{}, `the mapping under "properties" has more than 10000 members`, 32 * mb},
		{"a YAML flow collection of more values than allowed", yamlDocument("    E: {enum: [" + strings.Repeat("1, ", openapi.MaxFlowValues) + "1]}\n"), openapi.Source{},
			`the flow collection ({...} or [...]) under "E" holds more than 10000 values`, 32 * mb},
		{"more values than the source allows", emptySchemas(30_000), openapi.Source{MaxValues: 20_000}, "the document has more than 20000 values", 16 * mb},
		{"a JSON value after the document", append(manyOperations(2, false), `{"openapi":"3.0.3"}`...), openapi.Source{}, "not a readable OpenAPI document", 8 * mb},
		{"as many values as the source allows", emptySchemas(19_900), openapi.Source{MaxValues: 20_000}, "", 0},
		{"aliases within the bounds", laughs(3), openapi.Source{}, "", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := tc.src
			src.Name, src.Document = "hostile", tc.doc
			var err error
			var im *openapi.Import
			n := allocated(func() { im, err = openapi.Tools(context.Background(), src) })
			if tc.err == "" {
				if err != nil || len(im.Tools) != 1 {
					t.Fatalf("%v, %+v", err, im)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("error %v, want %q", err, tc.err)
			}
			if n > tc.allocated {
				t.Errorf("the refusal allocated %d MB, more than %d", n/mb, tc.allocated/mb)
			}
		})
	}
}
