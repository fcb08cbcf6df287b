package thread_test

import (
	"context"
	"strings"
	"testing"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/internal/backendtest"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/thread"
)

// A result's reference must name a file of the thread that records it: one to a missing path
// or to a directory becomes an error result, naming it, and nothing refers to it.
func TestAttachmentReferencesAreChecked(t *testing.T) {
	backendtest.Each(t, func(t *testing.T, st backendtest.Store) {
		th := newThread(t, st)
		fi, err := th.Files().Write(ctx, "/reports/q3.pdf", []byte("%PDF-1.7"), store.FileMeta{})
		if err != nil {
			t.Fatal(err)
		}
		ref := thread.AttachmentRef(fi)
		for i, c := range []struct {
			path, has string
		}{{"/reports/missing.pdf", "the thread has no file there"}, {"/reports", "it is a directory"}, {fi.Path, ""}} {
			id := "r" + string(rune('0'+i))
			if _, err := th.AppendAssistant(ctx, "", []quiver.Call{{ID: id, Name: "attach"}}); err != nil {
				t.Fatal(err)
			}
			a := ref
			a.Path = c.path
			r := &quiver.Result{Status: quiver.StatusSuccess, Text: "here", Attachments: []quiver.Attachment{a}}
			if err := th.RecordResult(ctx, &quiver.Call{ID: id, Name: "attach"}, r); err != nil {
				t.Fatal(err)
			}
			if c.has == "" {
				if r.IsError() || r.Attachments[0] != ref {
					t.Fatalf("a reference to a file: %+v", r)
				}
				continue
			}
			if !r.IsError() || r.Code != quiver.CodeInvalidOutput || !strings.Contains(r.Error, c.path) ||
				!strings.Contains(r.Error, c.has) || len(r.Attachments) != 0 {
				t.Fatalf("a reference to %s: %+v", c.path, r)
			}
		}
	})
}

// NotifyParent reaches the runtime's notifier through the context, and fails without one.
func TestNotifyParentSeam(t *testing.T) {
	if err := thread.NotifyParent(context.Background(), "hi"); err == nil || !strings.Contains(err.Error(), "no parent to notify") {
		t.Fatalf("without a notifier: %v", err)
	}
	var got string
	c := thread.WithParentNotifier(context.Background(), func(_ context.Context, text string) error { got = text; return nil })
	if err := thread.NotifyParent(c, "done"); err != nil || got != "done" {
		t.Fatalf("with a notifier: %v, sent %q", err, got)
	}
}
