package platform

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"

	"github.com/quiverhq/quiver/config"
	"github.com/quiverhq/quiver/platform/entitle"
	"github.com/quiverhq/quiver/store"
)

// The configuration file's entitlements block is the server's own workspace's entitlement
// document (Config.ServerWorkspace), applied to the database like the rest of the fleet's
// configuration: a node that serves a version whose block differs from the workspace's
// stored document stores the block as the document's next version (as SetEntitlements does,
// for the operator), and every node and door follows it as it follows any change of the
// document (within a second). Nodes that serve a version at once store it once: each writes
// after the version it read, and one that finds the document moved reads it again and finds
// it the block already. A version without the block leaves the stored document alone, for
// admins to set through the API or the console; with it, the configuration is the document's
// source, and SetEntitlements refuses a change (Conflict, naming the configuration), which the
// configuration's next version or a node's start would otherwise undo without a word.

// entitlementsAttempts bounds the reads and writes of one application: a conflict is another
// node storing the same block, or an admin's change, which a second read sees.
const entitlementsAttempts = 3

// applyEntitlements stores f's entitlements block as the server's own workspace's document
// when it differs from the one stored. What goes wrong is logged: the configuration is served
// anyway, and the next node to serve it, or this one at its next version, tries again.
func (p *Platform) applyEntitlements(ctx context.Context, f *config.File, where string) {
	ws := p.cfg.ServerWorkspace
	if ws == "" || f == nil || f.Entitlements == nil {
		return
	}
	want, err := json.Marshal(f.Entitlements)
	if err != nil {
		p.logger.ErrorContext(ctx, "platform: the configuration's entitlements cannot be encoded", "workspace", ws, "err", err)
		return
	}
	if _, err := entitle.Compile(f.Entitlements); err != nil { // config.Parse checked it: a bug
		p.logger.ErrorContext(ctx, "platform: the configuration's entitlements do not compile", "workspace", ws, "configuration", where, "err", err)
		return
	}
	for range entitlementsAttempts {
		stored, err := p.cfg.Store.WorkspaceEntitlements(ctx, ws)
		if err != nil {
			p.logger.ErrorContext(ctx, "platform: the workspace's entitlements cannot be read; the configuration's are not applied",
				"workspace", ws, "configuration", where, "err", err)
			return
		}
		if bytes.Equal(canonicalEntitlements(stored.Document), want) {
			return
		}
		// As SetEntitlements stores a document, without reading it back: its warnings would
		// make the workspace's dispatcher, which a node starting has not opened its journal
		// for yet.
		next := &store.WorkspaceEntitlements{WorkspaceID: ws, Document: want}
		err = p.cfg.Store.PutWorkspaceEntitlements(ctx, next, stored.Version)
		if err == nil {
			p.ToolsChanged(ctx, ws)
			p.logger.InfoContext(ctx, "platform: the configuration's entitlements are the workspace's", "workspace", ws,
				"configuration", where, "version", next.Version, "rules", len(f.Entitlements.Rules), "toolsets", len(f.Entitlements.Toolsets))
			return
		}
		if !errors.Is(err, store.ErrConflict) {
			p.logger.ErrorContext(ctx, "platform: the configuration's entitlements cannot be stored", "workspace", ws, "configuration", where, "err", err)
			return
		}
	}
	p.logger.WarnContext(ctx, "platform: the workspace's entitlements kept changing while the configuration's were applied; the next node to serve it tries again",
		"workspace", ws, "configuration", where)
}

// canonicalEntitlements is a stored document as SetEntitlements encodes one, to compare
// with a block (a store may keep it with keys in another order); "{}" for none, which is
// what an empty block encodes to, and nil for one that cannot be read, which differs from
// every block.
func canonicalEntitlements(stored json.RawMessage) []byte {
	if len(stored) == 0 {
		return []byte("{}")
	}
	doc, err := entitle.Decode(stored)
	if err != nil {
		return nil
	}
	out, err := json.Marshal(doc)
	if err != nil {
		return nil
	}
	return out
}
