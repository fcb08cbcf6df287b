package thread

import (
	"context"
	"errors"
)

// ParentNotifier sends text from the thread a call runs on to that thread's parent: the
// explicit parent communication of a resumable sub-agent (one whose configuration says its
// parent communication is explicit). The agent runtime installs one (agent.NotifyParent) in the context of the calls
// it runs, so that a tool reaches it through NotifyParent without importing the runtime.
type ParentNotifier func(ctx context.Context, text string) error

type notifierKey struct{}

// WithParentNotifier returns a context whose calls send their parent messages through n.
func WithParentNotifier(ctx context.Context, n ParentNotifier) context.Context {
	return context.WithValue(ctx, notifierKey{}, n)
}

// NotifyParent sends text to the parent of the thread the call in ctx runs on, through the
// runtime's ParentNotifier. Outside a runtime that installed one (a call made outside an
// agent's run) it fails, saying so.
func NotifyParent(ctx context.Context, text string) error {
	n, _ := ctx.Value(notifierKey{}).(ParentNotifier)
	if n == nil {
		return errors.New("thread: NotifyParent: the call does not run in an agent's run on a child thread, so it has no parent to notify")
	}
	return n(ctx, text)
}
