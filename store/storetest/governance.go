package storetest

import (
	"strings"
	"testing"

	"github.com/quiverhq/quiver/store"
)

// governanceDocs drives a workspace's governance rules through testWorkspaceDocs.
var governanceDocs = workspaceDocs{
	what: "governance rules",
	get: func(s store.Entities, workspaceID string) (stored, error) {
		g, err := s.WorkspaceGovernance(ctx, workspaceID)
		if err != nil {
			return stored{}, err
		}
		return stored{g.WorkspaceID, g.Rules, g.Version, g.UpdatedBy, g.UpdatedAt}, nil
	},
	put: func(s store.Entities, d stored, after int64) (stored, error) {
		g := &store.WorkspaceGovernance{WorkspaceID: d.WorkspaceID, Rules: d.Doc, UpdatedBy: d.UpdatedBy}
		err := s.PutWorkspaceGovernance(ctx, g, after)
		return stored{g.WorkspaceID, g.Rules, g.Version, g.UpdatedBy, g.UpdatedAt}, err
	},
	first:  []byte(`[{"tools":["x"],"access":"deny"}]`),
	second: []byte(`[]`),
	invalid: map[string][]byte{
		"as an object":        []byte(`{"tools":[]}`),
		"as null":             []byte(`null`),
		"not JSON":            []byte(`[{]`),
		"over the byte bound": []byte("[" + strings.Repeat(`{},`, store.MaxGovernanceBytes/3) + "{}]"),
	},
}

// testGovernance: see testWorkspaceDocs.
func testGovernance(t *testing.T, s store.Entities) { testWorkspaceDocs(t, s, governanceDocs) }
