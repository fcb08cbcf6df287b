package quiver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"testing"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/schema"
)

// benchToolSchema is the input schema of serverbench's filler tools: four arguments with
// bounds and descriptions, about the size of a typical stored tool's.
const benchToolSchema = `{"type":"object","properties":{
	"query":{"type":"string","maxLength":200,"description":"Words to look for in the records of collection 0001"},
	"limit":{"type":"integer","minimum":1,"maximum":100,"description":"How many records to return at most, 1 to 100"},
	"include_archived":{"type":"boolean","description":"Also look in the archived records"},
	"tags":{"type":"array","items":{"type":"string"},"maxItems":10,"description":"Only the records that carry every one of these tags"}},
	"required":["query"]}`

// BenchmarkSchemasCompiledOnUse compares a tool whose schemas are compiled when it is made
// (kept) with one made with quiver.WithSchemasCompiledOnUse, each with benchToolSchema:
//   - make: making the tool (both compile the schema once, to check it);
//   - first-call: making the tool and its first call (on use: one compilation more);
//   - later-call: a call of a tool called before (both: no compilation);
//   - held: the heap 1,000 such tools hold once made and collected (held-B/tool).
func BenchmarkSchemasCompiledOnUse(b *testing.B) {
	var in schema.Schema
	if err := json.Unmarshal([]byte(benchToolSchema), &in); err != nil {
		b.Fatal(err)
	}
	fn := func(context.Context, json.RawMessage) (any, error) { return "found", nil }
	args := json.RawMessage(`{"query":"blue whales","limit":5}`)
	for _, mode := range []struct {
		name string
		ctx  context.Context
	}{{"when-made", context.Background()}, {"on-use", quiver.WithSchemasCompiledOnUse(context.Background())}} {
		makeTool := func(b *testing.B, name string) *quiver.Tool {
			t, err := quiver.NewToolContext(mode.ctx, quiver.Spec{Name: name, Description: "Searches the records.", InputSchema: &in}, fn)
			if err != nil {
				b.Fatal(err)
			}
			return t
		}
		call := func(b *testing.B, d *quiver.Dispatcher, name string) {
			r, err := d.Dispatch(context.Background(), quiver.Call{Name: name, Args: args})
			if err != nil || r.IsError() {
				b.Fatalf("%+v %v", r, err)
			}
		}
		b.Run(mode.name+"/make", func(b *testing.B) {
			for b.Loop() {
				makeTool(b, "search")
			}
		})
		b.Run(mode.name+"/first-call", func(b *testing.B) {
			for b.Loop() {
				d := &quiver.Dispatcher{Registry: &quiver.Registry{}}
				if err := d.Registry.Register(makeTool(b, "search")); err != nil {
					b.Fatal(err)
				}
				call(b, d, "search")
			}
		})
		b.Run(mode.name+"/later-call", func(b *testing.B) {
			d := &quiver.Dispatcher{Registry: &quiver.Registry{}}
			if err := d.Registry.Register(makeTool(b, "search")); err != nil {
				b.Fatal(err)
			}
			call(b, d, "search")
			for b.Loop() {
				call(b, d, "search")
			}
		})
		b.Run(mode.name+"/held", func(b *testing.B) {
			const n = 1000
			for b.Loop() {
				before := heapInUse()
				tools := make([]*quiver.Tool, n)
				for i := range tools {
					tools[i] = makeTool(b, fmt.Sprintf("search_%d", i))
				}
				after := heapInUse()
				runtime.KeepAlive(tools)
				b.ReportMetric(float64(after-before)/n, "held-B/tool")
			}
		})
	}
}

// heapInUse is the heap's live bytes after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
