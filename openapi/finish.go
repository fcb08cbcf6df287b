package openapi

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/schema"
)

// finishAll makes the tools of the prepared operations, in the document's order, a few at once
// (one a processor, at most four). They share a compile cache: the schemas that are the same
// JSON (the operations that answer the same component, GitHub's hundreds of lists of
// repositories and issues) are compiled, and held, once.
func (b *builder) finishAll(made []madeOp) (*Import, error) {
	ctx := schema.WithCompileCache(b.ctx, &schema.CompileCache{})
	tools := make([]*quiver.Tool, len(made))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), 4, len(made)) {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= len(made) {
					return
				}
				tools[i] = finish(ctx, &made[i])
			}
		})
	}
	wg.Wait()
	if err := b.ctx.Err(); err != nil {
		return nil, err // the request it is read for ended
	}
	im := &Import{}
	for i, t := range tools {
		if t != nil {
			im.Tools = append(im.Tools, t)
		} else {
			im.Skipped = append(im.Skipped, Skipped{Operation: made[i].operation, Reason: made[i].reason})
		}
	}
	return im, nil
}

// finish makes the tool of a prepared operation, or says in its reason why it cannot be one
// (nil). What it was made from is dropped as it goes: the tool holds its own copy.
func finish(ctx context.Context, m *madeOp) *quiver.Tool {
	if m.reason != "" {
		return nil
	}
	err := m.decodeSchemas()
	var t *quiver.Tool
	if err == nil {
		t, err = quiver.NewToolContext(ctx, m.spec, m.call)
	}
	m.spec, m.call = quiver.Spec{}, nil
	if err != nil {
		m.reason = "the document describes it in a way Quiver cannot use: " + err.Error()
		return nil
	}
	return t
}
