package schema_test

import (
	"context"
	"sync"
	"testing"

	"github.com/quiverhq/quiver/schema"
)

// TestCompileCache: within a context carrying a cache, equal schemas (by their JSON) compile
// once and share the compiled copy, from several goroutines at once; a different schema, or a
// compilation without the cache, compiles anew; a schema that fails is not kept.
func TestCompileCache(t *testing.T) {
	point := func() *schema.Schema {
		return &schema.Schema{Type: "object", Required: []string{"x"}, Properties: map[string]*schema.Schema{"x": {Type: "integer"}}}
	}
	cache := &schema.CompileCache{}
	ctx := schema.WithCompileCache(context.Background(), cache)
	first, err := schema.CompileContext(ctx, point())
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			again, err := schema.CompileContext(ctx, point())
			if err != nil || again != first {
				t.Errorf("an equal schema compiled anew (%v)", err)
			}
		})
	}
	wg.Wait()
	if cache.Hits() != 8 {
		t.Errorf("%d hits, want 8", cache.Hits())
	}
	other := point()
	other.Properties["x"].Type = "string"
	for name, tc := range map[string]struct {
		ctx context.Context
		s   *schema.Schema
	}{
		"another schema":    {ctx, other},
		"without the cache": {context.Background(), point()},
	} {
		c, err := schema.CompileContext(tc.ctx, tc.s)
		if err != nil || c == first {
			t.Errorf("%s: shared the first's compiled copy (%v)", name, err)
		}
	}
	bad := &schema.Schema{Type: "string", Pattern: "("}
	for range 2 {
		if _, err := schema.CompileContext(ctx, bad); err == nil {
			t.Fatal("a schema with an invalid pattern compiled")
		}
	}
	if cache.Hits() != 8 {
		t.Errorf("%d hits after the failures, want 8", cache.Hits())
	}
	if err := first.Validate(map[string]any{"x": 1.0}); err != nil {
		t.Errorf("the shared copy validates: %v", err)
	}
}
