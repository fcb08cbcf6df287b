package server_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/internal/backendtest"
	"github.com/quiverhq/quiver/platform/entitle"
	"github.com/quiverhq/quiver/store"
)

// TestEntitlementsDocumentRoundTrip: the API's own types for the document (named for the
// OpenAPI document) carry every field of package entitle's both ways: a document setting each
// field of each type comes back from GET /v1/entitlements as it was PUT. A field entitle gains
// fails the test until the document below sets it, and then until the API carries it.
func TestEntitlementsDocumentRoundTrip(t *testing.T) {
	yes, no := quiver.Hint(true), quiver.Hint(false)
	want := entitle.Document{
		Default: quiver.AccessDeny,
		Rules: []entitle.Rule{{
			Who: entitle.Who{Key: "key_x", Role: "member", User: "usr_x", Claim: "groups", Value: "eng", Agent: "triage*", Toolset: "support"},
			Selector: entitle.Selector{Tools: []string{"support_*", "echo"}, Source: "go", Toolset: "support",
				When: quiver.Hints{ReadOnly: yes, Destructive: no, Idempotent: yes, OpenWorld: no}},
			Access:      quiver.AccessAllow,
			Description: "support reads",
		}},
		Toolsets: []entitle.Toolset{{Name: "support", Description: "What support uses.",
			Include: []entitle.Selector{{Tools: []string{"support_*"}, Source: "*", When: quiver.Hints{ReadOnly: yes}}}}},
	}
	all, set := map[string]bool{}, map[string]bool{}
	fieldsSet(reflect.ValueOf(want), all, set)
	for f := range all {
		if !set[f] {
			t.Fatalf("the test's document leaves %s unset: set it, for the round trip to hold it", f)
		}
	}
	backendtest.Each(t, func(t *testing.T, st backendtest.Store) {
		w := newEntitleWorld(t, st.(store.Backend))
		doc, err := json.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		if status, body := w.putDocument(t, string(doc), 0); status != 200 {
			t.Fatalf("PUT: %d %s", status, body)
		}
		status, body := w.send(t, "GET", "/v1/entitlements", "admin", nil)
		var got struct {
			Document entitle.Document `json:"document"`
		}
		if status != 200 || json.Unmarshal(body, &got) != nil {
			t.Fatalf("GET: %d %s", status, body)
		}
		if !reflect.DeepEqual(got.Document, want) {
			t.Errorf("GET /v1/entitlements gave back\n%s\nfor the document PUT\n%s", body, doc)
		}
	})
}

// fieldsSet records in all every field (Type.Field) of the structs v holds, and in set those
// that some value of v sets.
func fieldsSet(v reflect.Value, all, set map[string]bool) {
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Type().Field(i)
			name := v.Type().Name() + "." + f.Name
			all[name] = true
			if !v.Field(i).IsZero() {
				set[name] = true
			}
			fieldsSet(v.Field(i), all, set)
		}
	case reflect.Slice:
		for i := range v.Len() {
			fieldsSet(v.Index(i), all, set)
		}
	case reflect.Pointer:
		if !v.IsNil() {
			fieldsSet(v.Elem(), all, set)
		}
	}
}
