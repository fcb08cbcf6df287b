package server_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/quiverhq/quiver/internal/backendtest"
	"github.com/quiverhq/quiver/store"
)

// TestSessionShowsToolsets: GET /v1/session shows the toolsets a key is bound to, and says
// nothing of toolsets for a key bound to none.
func TestSessionShowsToolsets(t *testing.T) {
	backendtest.Each(t, func(t *testing.T, st backendtest.Store) {
		w := newEntitleWorld(t, st.(store.Backend))
		if status, body := w.putDocument(t, entitleDocument, 0); status != 200 {
			t.Fatalf("setting the document: %d %s", status, body)
		}
		support := w.bindKeys(t)
		for _, c := range []struct {
			who  string
			want []string
		}{{support, []string{"support"}}, {"member", nil}, {"admin", nil}} {
			status, body := w.send(t, "GET", "/v1/session", c.who, nil)
			var session struct {
				KeyID    string   `json:"key_id"`
				Toolsets []string `json:"toolsets"`
			}
			if status != 200 || json.Unmarshal(body, &session) != nil || session.KeyID == "" || !slices.Equal(session.Toolsets, c.want) {
				t.Errorf("the session of a key bound to %v: %d %s", c.want, status, body)
			}
			if c.want == nil && strings.Contains(string(body), `"toolsets"`) {
				t.Errorf("the session of a key bound to none names toolsets: %s", body)
			}
		}
	})
}
