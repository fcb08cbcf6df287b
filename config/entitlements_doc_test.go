package config_test

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"

	"github.com/quiverhq/quiver/platform/entitle"
)

// docs/guides/entitlements.md's PUT /v1/entitlements body is one the API takes: an after and a
// document that decodes strictly and checks (its shell blocks, which write and apply the YAML,
// are run by cmd/quiver's docs tests).
func TestEntitlementsGuideBody(t *testing.T) {
	md, err := os.ReadFile("../docs/guides/entitlements.md")
	if err != nil {
		t.Fatal(err)
	}
	bodies := 0
	for _, block := range docBlocks(string(md), "json") {
		var body struct {
			After    *int64          `json:"after"`
			Document json.RawMessage `json:"document"`
		}
		if err := json.Unmarshal([]byte(block), &body); err != nil || body.Document == nil {
			continue // an answer, not a body
		}
		bodies++
		dec := json.NewDecoder(bytes.NewReader([]byte(block)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&body); err != nil || body.After == nil {
			t.Errorf("a body with fields besides after and document, or no after (%v):\n%s", err, block)
		}
		doc, err := entitle.Decode(body.Document)
		if err != nil {
			t.Errorf("the body's document is refused: %v\n%s", err, block)
			continue
		}
		if _, err := entitle.Compile(doc); err != nil || len(doc.Rules) == 0 || len(doc.Toolsets) == 0 {
			t.Errorf("the body's document: %+v %v", doc, err)
		}
	}
	if bodies == 0 {
		t.Fatal("docs/guides/entitlements.md shows no PUT /v1/entitlements body")
	}
}
