package server_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/store"
)

// BenchmarkHostileSchemaIsolation measures what a workspace's member sending hostile schemas
// costs another workspace (security issue 45, break 1), on a server built as in
// BenchmarkAPICall: the median of workspace B's call of a cheap tool (echo, over the API),
// idle, then while eight goroutines post, as workspace A's member, a tool whose input schema
// is a lattice of 10 levels of four properties naming the next level (2.6 KB; before the
// bounds, each such request kept a core busy for seconds, and one of 16 levels for hours).
//
// Each attacker sends a request, waits for its answer, pauses 100 ms and sends the next (at
// most 80 a second in all; the attack of the report had eight in flight): attack-ms, and
// attack/idle against idle-ms. Without the pause (flood), any request saturates two cores,
// hostile or not: flood-ms is B's median under eight goroutines posting the hostile schema,
// benign-ms under eight posting an ordinary refused one with as many subschemas and no $refs.
// The medians are of B's calls that succeeded; attack-failed-% and flood-failed-% are the
// shares of those the server failed (before the bounds, most). Each op is one call of B's in
// each phase, a second of calls at least under attack.
func BenchmarkHostileSchemaIsolation(b *testing.B) {
	bs := newBenchServer(b, false)
	ctx := context.Background()
	bKey := secondWorkspaceKey(b, bs)
	// median is the median of B's calls that succeeded, and the share of them (%) that did
	// not: the server unable to serve them.
	median := func(n int, atLeast time.Duration) (time.Duration, float64) {
		ds := make([]time.Duration, 0, n)
		calls := 0
		for began := time.Now(); calls < n || time.Since(began) < atLeast; calls++ {
			start := time.Now()
			status, out, err := bs.doAs(ctx, bKey, "POST", "/v1/tools/echo/call", `{"args":{"text":"hi"}}`)
			if err == nil && status == http.StatusOK && strings.Contains(string(out), `"success"`) {
				ds = append(ds, time.Since(start))
			}
		}
		failed := 100 * float64(calls-len(ds)) / float64(calls)
		if len(ds) == 0 {
			return 0, failed
		}
		slices.Sort(ds)
		return ds[len(ds)/2], failed
	}
	lattice := refLattice(10, 4, "properties")
	hostile := map[string]any{"target": "client", "description": "A lattice.", "input_schema": lattice}
	// As many subschemas, without $refs, refused for a type that does not exist.
	props := map[string]any{"bad": map[string]any{"type": "strin"}}
	for i := range 50 {
		props[fmt.Sprintf("p%d", i)] = map[string]any{"type": "string"}
	}
	ordinary := map[string]any{"target": "client", "description": "An ordinary schema.",
		"input_schema": map[string]any{"type": "object", "properties": props}}
	// under is B's median while eight goroutines post tool, each time under a name of its own
	// (a name taken would be refused before the schema is read), pausing between answer and
	// request.
	var named atomic.Int64
	under := func(n int, tool map[string]any, pause time.Duration) (m time.Duration, failed, rate float64) {
		stop := make(chan struct{})
		var answered atomic.Int64
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					case <-time.After(pause):
					}
					body := maps.Clone(tool)
					body["name"] = fmt.Sprintf("tool_%d", named.Add(1))
					data, _ := json.Marshal(body)
					_, _, _ = bs.do(ctx, "POST", "/v1/tools", string(data)) // refused: TestHostileSchemasRefused
					answered.Add(1)
				}
			})
		}
		time.Sleep(200 * time.Millisecond) // let the attack start
		answered.Store(0)
		started := time.Now()
		m, failed = median(n, time.Second) // a second at least: the attack's rate is measured over it
		rate = float64(answered.Load()) / time.Since(started).Seconds()
		close(stop)
		wg.Wait()
		return m, failed, rate
	}
	n := max(b.N, 20)
	median(10, 0) // warm the connections and the workspace
	b.ResetTimer()
	idle, _ := median(n, 0)
	attack, attackFailed, rate := under(n, hostile, 100*time.Millisecond)
	flood, floodFailed, _ := under(n, hostile, 0)
	benign, _, _ := under(n, ordinary, 0)
	b.StopTimer()
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(idle), "idle-ms")
	b.ReportMetric(ms(attack), "attack-ms")
	b.ReportMetric(float64(attack)/float64(idle), "attack/idle")
	b.ReportMetric(attackFailed, "attack-failed-%")
	b.ReportMetric(rate, "hostile/s")
	b.ReportMetric(ms(flood), "flood-ms")
	b.ReportMetric(ms(benign), "benign-ms")
	b.ReportMetric(floodFailed, "flood-failed-%")
}

// secondWorkspaceKey makes a second workspace on the benchmark server's store, with a member
// and the member's key, and returns the key.
func secondWorkspaceKey(b *testing.B, bs *benchServer) string {
	b.Helper()
	ctx := context.Background()
	ws, u := &store.Workspace{Name: "other"}, &store.User{Email: "other-" + strings.ToLower(rand.Text()[:8]) + "@example.test"}
	benchMust(b, bs.st.CreateWorkspace(ctx, ws))
	benchMust(b, bs.st.CreateUser(ctx, u))
	benchMust(b, bs.st.AddMember(ctx, &store.Membership{WorkspaceID: ws.ID, UserID: u.ID, Role: store.MemberRoleMember}))
	secret, prefix, hash := platform.NewAPIKey()
	benchMust(b, bs.st.CreateAPIKey(ctx, &store.APIKey{WorkspaceID: ws.ID, UserID: u.ID, Name: "other", Role: store.KeyRoleMember, Prefix: prefix, Hash: hash}))
	return secret
}

// doAs is do with another key.
func (bs *benchServer) doAs(ctx context.Context, key, method, path, body string) (int, []byte, error) {
	other := *bs
	other.key = key
	return other.do(ctx, method, path, body)
}
