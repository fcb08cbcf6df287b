package thread

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/quiverhq/quiver/store"
)

// Log appends an entry to the thread's log. data, when not nil, is stored as JSON.
func (t *Thread) Log(ctx context.Context, level store.LogLevel, message string, data any) error {
	e := &store.LogEntry{Level: level, Message: message}
	if data != nil {
		b, err := json.Marshal(data)
		if err != nil {
			return fmt.Errorf("thread %s: log data: %w", t.id, err)
		}
		e.Data = b
	}
	return t.st.Log(ctx, t.ws, t.id, e)
}

// Logs returns a page of the thread's log, oldest first.
func (t *Thread) Logs(ctx context.Context, page store.Page) ([]*store.LogEntry, error) {
	return t.st.Logs(ctx, t.ws, t.id, page)
}
