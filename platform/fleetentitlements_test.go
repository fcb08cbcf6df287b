package platform_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/postgres"
	"github.com/quiverhq/quiver/store/postgres/pgtest"
	"github.com/quiverhq/quiver/store/sqlite"
)

// supportBlock is an entitlements block: support's toolset, viewers limited to the read-only
// tools, and more rules after it.
func supportBlock(more string) string {
	return `entitlements:
  toolsets:
    - name: support
      description: Support's tools
      include:
        - tools: [lookup_order, refund_payment]
  rules:
    - who: {role: viewer}
      when: {readOnlyHint: true}
      access: allow
` + more
}

const denyMembersDelete = `    - who: {role: member}
      tools: [delete_repository]
      access: deny
`

// sameDatabase opens two stores on one database for each backend, as two nodes of a fleet
// have: a SQLite file opened twice, a PostgreSQL schema of the test's own (skipped without
// QUIVER_TEST_POSTGRES).
func sameDatabase(t *testing.T, fn func(t *testing.T, a, b store.Backend)) {
	t.Run("sqlite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "q.db")
		var sts [2]store.Backend
		for i := range sts {
			st, err := sqlite.Open(path)
			must(t, err)
			t.Cleanup(func() { st.Close() })
			sts[i] = st
		}
		fn(t, sts[0], sts[1])
	})
	t.Run("postgres", func(t *testing.T) {
		dsn := pgtest.DSN(t)
		schema := pgtest.Schema(t, dsn)
		var sts [2]store.Backend
		for i := range sts {
			st, err := postgres.Open(context.Background(), dsn, postgres.WithSchema(schema))
			must(t, err)
			t.Cleanup(func() { st.Close() })
			sts[i] = st
		}
		fn(t, sts[0], sts[1])
	})
}

func entitlementTools() *quiver.Registry {
	noop := func(context.Context, struct{}) (string, error) { return "done", nil }
	reg := &quiver.Registry{}
	for _, t := range []*quiver.Tool{
		quiver.Func("lookup_order", "Looks an order up.", noop, quiver.WithAnnotations(quiver.Annotations{ReadOnlyHint: quiver.Hint(true)})),
		quiver.Func("refund_payment", "Refunds a payment.", noop),
		quiver.Func("delete_repository", "Deletes a repository.", noop),
	} {
		if err := reg.Register(t); err != nil {
			panic(err)
		}
	}
	return reg
}

func entitlementsNode(t *testing.T, st store.Backend) *platform.Platform {
	t.Helper()
	p, err := platform.New(platform.Config{Store: st, Registry: entitlementTools(), ServerWorkspace: "wsp_local",
		Logger: slog.New(slog.DiscardHandler)})
	must(t, err)
	return p
}

// offered lists the tools p's own workspace offers a caller of role.
func offered(p *platform.Platform, role store.KeyRole) []string {
	ctx := platform.WithActor(context.Background(), platform.Actor{WorkspaceID: "wsp_local", KeyID: "key_" + string(role), Role: role})
	var out []string
	for _, t := range p.Workspace(ctx, "wsp_local").Dispatcher().ToolsFor(ctx) {
		out = append(out, t.Name())
	}
	slices.Sort(out)
	return out
}

// storedEntitlements is the workspace's document on p, as JSON, and its version.
func storedEntitlements(t *testing.T, p *platform.Platform) (string, int64) {
	t.Helper()
	e, err := p.Entitlements(context.Background(), operator)
	must(t, err)
	doc, err := json.Marshal(e.Document)
	must(t, err)
	return string(doc), e.Version
}

// The configuration's entitlements block reaches the database like the rest of the fleet's
// configuration, on SQLite and PostgreSQL: the node that applies it stores it as the server's
// own workspace's document, the other node serves the same version without storing it again
// and its doors follow the document; a version without the block leaves an admin's document
// alone; a changed block is the next version, which the other node follows within a second;
// nodes that serve a version at once store it once; a block that does not check is refused.
func TestConfigurationEntitlements(t *testing.T) {
	sameDatabase(t, func(t *testing.T, stA, stB store.Backend) {
		ctx := context.Background()
		must(t, stA.CreateWorkspace(ctx, &store.Workspace{ID: "wsp_local", Name: "local"}))
		a, b := entitlementsNode(t, stA), entitlementsNode(t, stB)
		all := []string{"delete_repository", "lookup_order", "refund_payment"}
		if got := offered(b, store.KeyRoleViewer); !slices.Equal(got, all) {
			t.Fatalf("before any entitlements a viewer is offered %v, want %v", got, all)
		}

		// The first node started with the file makes it the fleet's, and the workspace's.
		dir := writeConfigDir(t, map[string]string{"quiver.yaml": supportBlock("")})
		ad, err := a.AdoptConfiguration(ctx, readConfiguration(t, dir), "node a")
		must(t, err)
		if !ad.Applied || ad.Version != 1 {
			t.Fatalf("adoption: %+v", ad)
		}
		doc, version := storedEntitlements(t, a)
		if version != 1 || !strings.Contains(doc, `"name":"support"`) || !strings.Contains(doc, `"readOnlyHint":true`) {
			t.Fatalf("the workspace's document after node a's start: version %d %s", version, doc)
		}

		// The second node serves the version, finds the document its block, and stores nothing.
		if _, err := b.AdoptConfiguration(ctx, nil, "node b"); err != nil {
			t.Fatal(err)
		}
		if got, v := storedEntitlements(t, b); got != doc || v != 1 {
			t.Fatalf("node b sees version %d %s, want version 1 %s", v, got, doc)
		}
		waitOffered(t, b, store.KeyRoleViewer, []string{"lookup_order"})
		member := platform.Actor{WorkspaceID: "wsp_local", KeyID: "key_m", Role: store.KeyRoleMember}
		sets, err := b.Toolsets(ctx, member)
		must(t, err)
		if len(sets) != 1 || sets[0].Name != "support" || !slices.Equal(sets[0].Tools, []string{"lookup_order", "refund_payment"}) {
			t.Fatalf("node b's toolsets for a member: %+v", sets)
		}

		// While the configuration has the block, it is the document's source: an admin's change
		// is refused, saying where to make it, rather than lost at the next version.
		e, err := b.Entitlements(ctx, operator)
		must(t, err)
		e.Document.Rules = append(e.Document.Rules, e.Document.Rules[0])
		_, err = b.SetEntitlements(ctx, operator, e.Document, 1)
		refusal(t, "a change while the configuration has the block", err, platform.Conflict, "document")
		// So is one through a platform that serves no configuration (quiver access set's): the
		// block is read from the database.
		_, err = entitlementsNode(t, stB).SetEntitlements(ctx, operator, e.Document, 1)
		refusal(t, "a change through a platform serving no configuration", err, platform.Conflict, "document")
		// A version without the block leaves the document as it is, to the admins, who change it.
		noBlock := writeConfigDir(t, map[string]string{"quiver.yaml": "governance:\n  - tools: [refund_payment]\n    timeout: 1m\n"})
		applied, err := a.ApplyConfiguration(ctx, operator, readConfiguration(t, noBlock), platform.ApplyOptions{})
		must(t, err)
		if !slices.Contains(changes(applied.Changes), "entitlements removed") || applied.Version != 2 {
			t.Fatalf("applying a file without the block: %+v %v", applied, changes(applied.Changes))
		}
		must(t, a.LoadConfiguration(ctx))
		must(t, b.LoadConfiguration(ctx))
		if got, v := storedEntitlements(t, a); got != doc || v != 1 {
			t.Fatalf("a version without the block changed the document: version %d %s", v, got)
		}
		_, err = b.SetEntitlements(ctx, operator, e.Document, 1)
		must(t, err)
		if got, v := storedEntitlements(t, a); got == doc || v != 2 {
			t.Fatalf("the admin's change: version %d %s", v, got)
		}

		// A changed block is applied at once; the other node, watching, follows.
		stop := b.WatchConfiguration(ctx, 10*time.Millisecond)
		defer stop()
		changed := writeConfigDir(t, map[string]string{"quiver.yaml": supportBlock(denyMembersDelete)})
		applied, err = a.ApplyConfiguration(ctx, operator, readConfiguration(t, changed), platform.ApplyOptions{})
		must(t, err)
		if !slices.Contains(changes(applied.Changes), "entitlements added") || applied.Version != 3 {
			t.Fatalf("applying the changed block: %+v %v", applied, changes(applied.Changes))
		}
		doc, version = storedEntitlements(t, a)
		if version != 3 || !strings.Contains(doc, `"delete_repository"`) {
			t.Fatalf("after applying the changed block: version %d %s", version, doc)
		}
		waitOffered(t, b, store.KeyRoleMember, []string{"lookup_order", "refund_payment"})
		for deadline := time.Now().Add(10 * time.Second); b.ConfigurationVersion() != 3; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("node b serves version %d, want 3", b.ConfigurationVersion())
			}
		}
		if got, v := storedEntitlements(t, b); got != doc || v != 3 {
			t.Fatalf("node b serving version 3 stored it again: version %d %s", v, got)
		}

		// The stored document drifts from the block (written by another version, say), then two
		// nodes start at once: the block is stored again, once.
		e, err = b.Entitlements(ctx, operator)
		must(t, err)
		e.Document.Default = quiver.AccessDeny
		drifted, err := json.Marshal(e.Document)
		must(t, err)
		must(t, stA.PutWorkspaceEntitlements(ctx, &store.WorkspaceEntitlements{WorkspaceID: "wsp_local", Document: drifted}, 3))
		c, d := entitlementsNode(t, stA), entitlementsNode(t, stB)
		var wg sync.WaitGroup
		for _, n := range []*platform.Platform{c, d} {
			wg.Go(func() {
				if _, err := n.AdoptConfiguration(ctx, nil, "a restarted node"); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if got, v := storedEntitlements(t, c); got != doc || v != 5 {
			t.Fatalf("after two nodes started: version %d %s, want version 5 %s", v, got, doc)
		}

		// A block that does not check is refused, naming the field; nothing changes.
		bad := writeConfigDir(t, map[string]string{"quiver.yaml": supportBlock("    - tools: [x]\n      access: sometimes\n")})
		if _, err := platform.ReadConfiguration(ctx, bad); err == nil || !strings.Contains(err.Error(), "entitlements.rules[1].access") {
			t.Fatalf("a bad block: %v, want a refusal naming entitlements.rules[1].access", err)
		}
		if v, _, _ := stA.(store.FleetConfigs).FleetConfigVersion(ctx); v != 3 {
			t.Fatalf("the fleet's configuration is version %d, want 3", v)
		}
	})
}

// waitOffered waits for p's doors to offer a caller of role want, as they do within a
// second of a change of the document another node made.
func waitOffered(t *testing.T, p *platform.Platform, role store.KeyRole, want []string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for got := offered(p, role); !slices.Equal(got, want); got = offered(p, role) {
		if time.Now().After(deadline) {
			t.Fatalf("a %s is offered %v, want %v", role, got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
