package config_test

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"

	"github.com/quiverhq/quiver/platform/limits"
	"github.com/quiverhq/quiver/server"
)

// docs/guides/usage.md's examples are what Quiver reads and answers: its limits document with
// a price table decodes strictly, checks, and prices a request as the guide says; its answer
// of GET /v1/usage is the API's shape, field for field.
func TestUsageGuideExamples(t *testing.T) {
	md, err := os.ReadFile("../docs/guides/usage.md")
	if err != nil {
		t.Fatal(err)
	}
	var docs, answers int
	for _, block := range docBlocks(string(md), "json") {
		if bytes.Contains([]byte(block), []byte(`"prices"`)) {
			docs++
			doc, err := limits.Decode([]byte(block))
			if err != nil {
				t.Fatalf("the guide's limits document: %v", err)
			}
			if _, err := limits.Compile(doc); err != nil {
				t.Fatal(err)
			}
			// gpt-4o-mini's own price, before the gpt-4o* pattern that also matches it.
			if got := doc.CostMicros("openai:gpt-4o-mini", 1_000_000, 1_000_000); got != 750_000 {
				t.Errorf("a million tokens each way of gpt-4o-mini cost %d millionths, want 0.75", got)
			}
			if got := doc.CostMicros("mistral:large", 1_000_000, 0); got != 0 {
				t.Errorf("a model without a price cost %d", got)
			}
			continue
		}
		answers++
		dec := json.NewDecoder(bytes.NewReader([]byte(block)))
		dec.DisallowUnknownFields()
		var a server.UsageBody
		if err := dec.Decode(&a); err != nil || len(a.Rows) == 0 {
			t.Errorf("the guide's answer is not GET /v1/usage's (%v):\n%s", err, block)
		}
	}
	if docs != 1 || answers != 1 {
		t.Fatalf("%d limits documents and %d answers in the guide, want one of each", docs, answers)
	}
}
