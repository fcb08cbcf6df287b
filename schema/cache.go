package schema

import (
	"context"
	"sync"
)

// CompileCache shares compiled schemas between compilations of the same schema, by its JSON:
// a caller that compiles many schemas with much in common (the tools of one OpenAPI document,
// whose operations answer the same components) compiles each distinct one once and holds one
// compiled copy of it. A Compiled is never modified once made, so sharing it is safe; its
// Schema is the first of the equal schemas compiled. The zero value is ready to use; a cache
// lives as long as the context that carries it (WithCompileCache), so it holds no schema past
// the work it serves.
type CompileCache struct {
	mu   sync.Mutex
	m    map[string]*Compiled
	hits int // the compilations it saved
}

type compileCacheKey struct{}

// WithCompileCache returns ctx carrying c: CompileContext with it looks c up before
// compiling, and keeps what it compiles there.
func WithCompileCache(ctx context.Context, c *CompileCache) context.Context {
	return context.WithValue(ctx, compileCacheKey{}, c)
}

// Hits is how many compilations the cache saved.
func (c *CompileCache) Hits() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hits
}

func (c *CompileCache) get(raw []byte) *Compiled {
	c.mu.Lock()
	defer c.mu.Unlock()
	v := c.m[string(raw)]
	if v != nil {
		c.hits++
	}
	return v
}

func (c *CompileCache) put(raw []byte, v *Compiled) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]*Compiled{}
	}
	c.m[string(raw)] = v
}

// cacheOf is the compile cache ctx carries, or nil.
func cacheOf(ctx context.Context) *CompileCache {
	c, _ := ctx.Value(compileCacheKey{}).(*CompileCache)
	return c
}
