package platform_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/store/postgres"
	"github.com/quiverhq/quiver/store/postgres/pgtest"
)

// More calls than the store's pool has connections all want a token about to expire: each
// gets it, refreshed once, and none waits for a connection that the others hold. (The refresh
// read the workspace's providers through the pool inside the connection's row lock, while the
// calls waiting for the lock held every other connection: on CI it hung TestConnections.)
func TestConnectionRefreshWithAFullPool(t *testing.T) {
	dsn := pgtest.DSN(t)
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	st, err := postgres.Open(context.Background(), dsn+sep+"pool_max_conns=2", postgres.WithSchema(pgtest.Schema(t, dsn)))
	must(t, err)
	t.Cleanup(func() { st.Close() })
	w := newConnectWorld(t, st)
	w.as.ExpiresIn.Store(30) // under a minute: the first call refreshes it
	cb, _ := w.authorize(t, "usr_ada", false)
	_, err = w.p.FinishConnection(context.Background(), cb)
	must(t, err)
	w.as.ExpiresIn.Store(3600)

	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			r, err := w.p.Workspace(ctx, w.ws).Dispatcher().Call(platform.WithActor(ctx, w.member("usr_ada")), "whoami", nil)
			if err != nil || r.IsError() || !strings.Contains(r.Text, "known=yes") {
				t.Errorf("a call with the pool full: %+v %v", r, err)
			}
		})
	}
	wg.Wait()
	if n := w.as.RefreshGrants.Load(); n != 1 {
		t.Errorf("eight calls of a token about to expire refreshed it %d times, want once", n)
	}
}
