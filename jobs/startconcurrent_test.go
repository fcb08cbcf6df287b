package jobs

import (
	"context"
	"os"
	"sync"
	"testing"

	"github.com/quiverhq/quiver/store/postgres/pgtest"
)

// Nodes started at once on a new PostgreSQL database all start: River's tables are made by
// one of them while the others wait, where River's migration alone failed on all but one
// ("relation river_migration already exists").
func TestNodesStartAtOnceOnANewDatabase(t *testing.T) {
	if os.Getenv(pgtest.EnvDSN) == "" && os.Getenv("CI") != "true" {
		t.Skipf("PostgreSQL not tested: %s is not set", pgtest.EnvDSN)
	}
	dsn := pgtest.DSN(t)
	schemaName := pgtest.Schema(t, dsn)
	const nodes = 4
	var wg sync.WaitGroup
	errs := make([]error, nodes)
	started := make([]*Jobs, nodes)
	for i := range nodes {
		st, pool, err := openPostgres(dsn, schemaName)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		_, reg := newTools(t)
		cfg := config(st, reg, &stepModel{turns: []string{"done"}})
		wg.Go(func() { started[i], errs[i] = StartPostgres(context.Background(), pool, cfg) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("node %d: %v", i, err)
			continue
		}
		started[i].Stop(context.Background())
	}
}
