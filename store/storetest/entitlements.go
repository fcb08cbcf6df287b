package storetest

import (
	"strings"
	"testing"

	"github.com/quiverhq/quiver/store"
)

// entitlementsDocs drives a workspace's entitlement document through testWorkspaceDocs.
var entitlementsDocs = workspaceDocs{
	what: "entitlements",
	get: func(s store.Entities, workspaceID string) (stored, error) {
		e, err := s.WorkspaceEntitlements(ctx, workspaceID)
		if err != nil {
			return stored{}, err
		}
		return stored{e.WorkspaceID, e.Document, e.Version, e.UpdatedBy, e.UpdatedAt}, nil
	},
	put: func(s store.Entities, d stored, after int64) (stored, error) {
		e := &store.WorkspaceEntitlements{WorkspaceID: d.WorkspaceID, Document: d.Doc, UpdatedBy: d.UpdatedBy}
		err := s.PutWorkspaceEntitlements(ctx, e, after)
		return stored{e.WorkspaceID, e.Document, e.Version, e.UpdatedBy, e.UpdatedAt}, err
	},
	first:  []byte(`{"default":"deny","rules":[{"callers":["usr_1"],"toolsets":["billing"]}],"toolsets":{"billing":["invoice"]}}`),
	second: []byte(`{}`),
	invalid: map[string][]byte{
		"as an array":         []byte(`[]`),
		"as null":             []byte(`null`),
		"as a string":         []byte(`"deny"`),
		"not JSON":            []byte(`{"default":}`),
		"empty":               nil,
		"over the byte bound": []byte(`{"x":"` + strings.Repeat("x", store.MaxEntitlementsBytes) + `"}`),
	},
}

// testEntitlements: see testWorkspaceDocs; besides, the entitlements and the governance rules
// are kept apart.
func testEntitlements(t *testing.T, s store.Entities) {
	testWorkspaceDocs(t, s, entitlementsDocs)
	f := newFixture(t, s, "apart")
	_, err := entitlementsDocs.put(s, stored{WorkspaceID: f.ws.ID, Doc: entitlementsDocs.first}, 0)
	mustOK(t, "put entitlements", err)
	if g, err := governanceDocs.get(s, f.ws.ID); err != nil || g.Version != 0 || len(g.Doc) != 0 {
		t.Errorf("governance rules after storing entitlements only: %+v, %v; want none", g, err)
	}
	_, err = governanceDocs.put(s, stored{WorkspaceID: f.ws.ID, Doc: governanceDocs.first}, 0)
	mustOK(t, "put governance rules", err)
	if e, err := entitlementsDocs.get(s, f.ws.ID); err != nil || e.Version != 1 || string(e.Doc) != string(entitlementsDocs.first) {
		t.Errorf("entitlements after storing governance rules: %+v, %v; want version 1 as stored", e, err)
	}
}
