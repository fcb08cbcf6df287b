package openapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/quiverhq/quiver/openapi"
)

// BenchmarkDocumentImport: what reading a document costs until its tools are made or it is
// refused, per import (B/op) and at the heap's peak (peak-heap-MB: the heap's objects, live
// or not yet swept, sampled every 100 µs, less what was there before). The hostile documents
// are security issue 45's: 40,000 trivial operations, 3.4 MB of JSON or 3.2 MB of YAML. The
// real-shaped one is petstore-expanded's paths and schemas a thousand times over, 2.6 MB of
// compact JSON (4,000 operations, 140,000 values), of which one copy's are selected. The worst
// a workspace may import (200,000 values, as platform's maxOpenAPIValues): 199,900 empty
// schemas in JSON, the values that cost the loader most; and 4 MB of YAML that is one flow
// sequence of 2,000,000 numbers, refused once counted (counting YAML costs its node tree).
func BenchmarkDocumentImport(b *testing.B) {
	real := petstoreCopies(b, 1000)
	for _, bc := range []struct {
		name      string
		doc       []byte
		ops       []string
		maxValues int
	}{
		{"hostile-json", manyOperations(40_000, false), nil, 0},
		{"hostile-yaml", manyOperations(40_000, true), nil, 0},
		{"petstore-x1000-json", real, []string{"c0findPets", "c0addPet", "c0find pet by id", "c0deletePet"}, 0},
		{"worst-json", emptySchemas(199_900), nil, 200_000},
		{"worst-yaml", flowSequence(2_000_000), nil, 200_000},
	} {
		b.Run(bc.name, func(b *testing.B) {
			src := openapi.Source{Name: "bench", Document: bc.doc, Operations: bc.ops, MaxValues: bc.maxValues}
			b.ReportAllocs()
			var peak uint64
			for b.Loop() {
				peak = max(peak, peakHeap(func() { openapi.Tools(context.Background(), src) }))
			}
			b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MB")
		})
	}
}

// flowSequence is a YAML document written as one flow mapping, of one operation and an enum of
// n numbers: two bytes a value, the densest YAML there is.
func flowSequence(n int) []byte {
	return []byte("{openapi: 3.0.3, info: {title: t, version: '1'}, servers: [{url: 'https://h.example'}], " +
		"paths: {/a: {get: {operationId: a, responses: {'200': {description: ok}}}}}, " +
		"components: {schemas: {E: {enum: [" + strings.Repeat("1,", n-1) + "1]}}}}")
}

// peakHeap is the most the heap's objects grew by while f ran, sampled.
func peakHeap(f func()) uint64 {
	runtime.GC()
	read := func(s []metrics.Sample) uint64 {
		metrics.Read(s)
		return s[0].Value.Uint64()
	}
	base := read([]metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}})
	stop, result := make(chan struct{}), make(chan uint64)
	go func() {
		sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		peak := base
		for {
			peak = max(peak, read(sample))
			select {
			case <-stop:
				result <- peak - base
				return
			case <-time.After(100 * time.Microsecond):
			}
		}
	}()
	f()
	close(stop)
	return <-result
}

// petstoreCopies is petstore-expanded's paths and schemas n times over, as compact JSON: the
// shape of a real document, at the size of a large one.
func petstoreCopies(tb testing.TB, n int) []byte {
	raw, err := os.ReadFile("testdata/petstore-expanded.yaml")
	if err != nil {
		tb.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		tb.Fatal(err)
	}
	paths, _ := json.Marshal(doc["paths"])
	schemas, _ := json.Marshal(doc["components"].(map[string]any)["schemas"])
	copyOf := func(i int, members []byte) string {
		s := string(members[1 : len(members)-1])
		s = strings.ReplaceAll(s, `"/pets`, fmt.Sprintf(`"/c%d/pets`, i))
		s = strings.ReplaceAll(s, `#/components/schemas/`, fmt.Sprintf(`#/components/schemas/C%d`, i))
		s = strings.ReplaceAll(s, `"operationId":"`, fmt.Sprintf(`"operationId":"c%d`, i))
		for _, name := range []string{"Pet", "NewPet", "Error"} {
			s = strings.ReplaceAll(s, `"`+name+`":{`, fmt.Sprintf(`"C%d%s":{`, i, name))
		}
		return s
	}
	var b strings.Builder
	b.WriteString(`{"openapi":"3.0.0","info":{"title":"t","version":"1"},"servers":[{"url":"https://h.example"}],"paths":{`)
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(copyOf(i, paths))
	}
	b.WriteString(`},"components":{"schemas":{`)
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(copyOf(i, schemas))
	}
	b.WriteString(`}}}`)
	return []byte(b.String())
}
