package platform

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/quiverhq/quiver/config"
	"github.com/quiverhq/quiver/platform/connect"
	"github.com/quiverhq/quiver/platform/entitle"
	"github.com/quiverhq/quiver/platform/limits"
	"github.com/quiverhq/quiver/store"
)

// The configuration file's entitlements and limits blocks are the server's own workspace's
// documents (Config.ServerWorkspace), applied to the database like the rest of the fleet's
// configuration: a node that serves a version whose block differs from the workspace's
// stored document stores the block as the document's next version (as SetEntitlements and
// SetLimits do, for the operator), and every node and door follows it as it follows any
// change of the document (within a second). Nodes that serve a version at once store it once:
// each writes after the version it read, and one that finds the document moved reads it
// again and finds it the block already. A version without the block leaves the stored
// document alone, for admins to set through the API or the console; with it, the
// configuration is the document's source, and the API refuses a change (Conflict, naming the
// configuration), which the configuration's next version or a node's start would otherwise
// undo without a word.

// fleetDoc is a workspace document the configuration may hold as a block.
type fleetDoc struct {
	name string
	// block is f's block, encoded as the platform stores it; nil when f has none.
	block func(f *config.File) (json.RawMessage, error)
	// canonical is a stored document as the platform encodes one, to compare with a block (a
	// store may keep it with keys in another order); "{}" for none, which is what an empty
	// block encodes to, and nil for one that cannot be read, which differs from every block.
	canonical func(stored json.RawMessage) []byte
	read      func(ctx context.Context, st store.Backend, ws string) (json.RawMessage, int64, error)
	put       func(ctx context.Context, st store.Backend, ws string, doc json.RawMessage, after int64) (int64, error)
	// stored, when set, follows a change stored (the limits': the runs paused for their budget
	// go on, and check it again).
	stored func(p *Platform, ctx context.Context, ws string)
}

var entitlementsDoc = fleetDoc{
	name: "entitlements",
	block: func(f *config.File) (json.RawMessage, error) {
		if f == nil || f.Entitlements == nil {
			return nil, nil
		}
		if _, err := entitle.Compile(f.Entitlements); err != nil { // config.Parse checked it: a bug
			return nil, err
		}
		return json.Marshal(f.Entitlements)
	},
	canonical: canonicalDoc(entitle.Decode),
	read: func(ctx context.Context, st store.Backend, ws string) (json.RawMessage, int64, error) {
		e, err := st.WorkspaceEntitlements(ctx, ws)
		if err != nil {
			return nil, 0, err
		}
		return e.Document, e.Version, nil
	},
	put: func(ctx context.Context, st store.Backend, ws string, doc json.RawMessage, after int64) (int64, error) {
		e := &store.WorkspaceEntitlements{WorkspaceID: ws, Document: doc}
		err := st.PutWorkspaceEntitlements(ctx, e, after)
		return e.Version, err
	},
}

var limitsDoc = fleetDoc{
	name: "limits",
	block: func(f *config.File) (json.RawMessage, error) {
		if f == nil || f.Limits == nil {
			return nil, nil
		}
		if _, err := limits.Compile(f.Limits); err != nil { // config.Parse checked it: a bug
			return nil, err
		}
		return json.Marshal(f.Limits)
	},
	canonical: canonicalDoc(limits.Decode),
	read: func(ctx context.Context, st store.Backend, ws string) (json.RawMessage, int64, error) {
		l, err := st.WorkspaceLimits(ctx, ws)
		if err != nil {
			return nil, 0, err
		}
		return l.Document, l.Version, nil
	},
	put: func(ctx context.Context, st store.Backend, ws string, doc json.RawMessage, after int64) (int64, error) {
		l := &store.WorkspaceLimits{WorkspaceID: ws, Document: doc}
		err := st.PutWorkspaceLimits(ctx, l, after)
		return l.Version, err
	},
	stored: (*Platform).resumeBudgets,
}

var connectionsDoc = fleetDoc{
	name: "connection providers",
	block: func(f *config.File) (json.RawMessage, error) {
		if f == nil || f.Connections == nil {
			return nil, nil
		}
		if err := f.Connections.Check(); err != nil { // config.Parse checked it: a bug
			return nil, err
		}
		return json.Marshal(f.Connections)
	},
	canonical: canonicalDoc(connect.Decode),
	read: func(ctx context.Context, st store.Backend, ws string) (json.RawMessage, int64, error) {
		cs, ok := st.(store.Connections)
		if !ok {
			return nil, 0, errors.New("the store keeps no connections")
		}
		c, err := cs.WorkspaceConnections(ctx, ws)
		if err != nil {
			return nil, 0, err
		}
		return c.Document, c.Version, nil
	},
	put: func(ctx context.Context, st store.Backend, ws string, doc json.RawMessage, after int64) (int64, error) {
		c := &store.WorkspaceConnections{WorkspaceID: ws, Document: doc}
		err := st.(store.Connections).PutWorkspaceConnections(ctx, c, after)
		return c.Version, err
	},
}

// canonicalDoc is a fleetDoc's canonical for documents decode reads.
func canonicalDoc[D any](decode func([]byte) (*D, error)) func(json.RawMessage) []byte {
	return func(stored json.RawMessage) []byte {
		if len(stored) == 0 {
			return []byte("{}")
		}
		doc, err := decode(stored)
		if err != nil {
			return nil
		}
		out, err := json.Marshal(doc)
		if err != nil {
			return nil
		}
		return out
	}
}

// docAttempts bounds the reads and writes of one application: a conflict is another node
// storing the same block, or an admin's change, which a second read sees.
const docAttempts = 3

// applyDocuments stores f's entitlements and limits blocks as the server's own workspace's
// documents where they differ from those stored.
func (p *Platform) applyDocuments(ctx context.Context, f *config.File, where string) {
	p.applyDocument(ctx, entitlementsDoc, f, where)
	p.applyDocument(ctx, limitsDoc, f, where)
	p.applyDocument(ctx, connectionsDoc, f, where)
}

// applyDocument stores f's block of kind as the server's own workspace's document when it
// differs from the one stored. What goes wrong is logged: the configuration is served anyway,
// and the next node to serve it, or this one at its next version, tries again.
func (p *Platform) applyDocument(ctx context.Context, kind fleetDoc, f *config.File, where string) {
	ws := p.cfg.ServerWorkspace
	if ws == "" {
		return
	}
	want, err := kind.block(f)
	if err != nil {
		p.logger.ErrorContext(ctx, "platform: the configuration's "+kind.name+" cannot be applied", "workspace", ws, "configuration", where, "err", err)
		return
	}
	if want == nil {
		return
	}
	for range docAttempts {
		stored, version, err := kind.read(ctx, p.cfg.Store, ws)
		if err != nil {
			p.logger.ErrorContext(ctx, "platform: the workspace's "+kind.name+" cannot be read; the configuration's are not applied",
				"workspace", ws, "configuration", where, "err", err)
			return
		}
		if bytes.Equal(kind.canonical(stored), want) {
			return
		}
		// As the API stores a document, without reading it back: its warnings would make the
		// workspace's dispatcher, which a node starting has not opened its journal for yet.
		next, err := kind.put(ctx, p.cfg.Store, ws, want, version)
		if err == nil {
			p.ToolsChanged(ctx, ws)
			if kind.stored != nil {
				kind.stored(p, ctx, ws)
			}
			p.logger.InfoContext(ctx, "platform: the configuration's "+kind.name+" are the workspace's", "workspace", ws,
				"configuration", where, "version", next)
			return
		}
		if !errors.Is(err, store.ErrConflict) {
			p.logger.ErrorContext(ctx, "platform: the configuration's "+kind.name+" cannot be stored", "workspace", ws, "configuration", where, "err", err)
			return
		}
	}
	p.logger.WarnContext(ctx, "platform: the workspace's "+kind.name+" kept changing while the configuration's were applied; the next node to serve it tries again",
		"workspace", ws, "configuration", where)
}

// documentSource names the configuration whose block of kind is the workspace's document (""
// when none is: an admin sets it here): the fleet's latest version in the database, which
// every node serves (read there, so that a command that serves none, quiver access set, is
// refused as the API is), else the files this node serves without one.
func (p *Platform) documentSource(ctx context.Context, kind fleetDoc, workspaceID string) (string, error) {
	if workspaceID != p.cfg.ServerWorkspace {
		return "", nil
	}
	hasBlock := func(c *Configuration) bool {
		if c == nil || c.File == nil {
			return false
		}
		b, err := kind.block(c.File)
		return b != nil || err != nil
	}
	if fc := p.fleetConfigs(); fc != nil {
		latest, version, err := LatestConfiguration(ctx, fc)
		if err != nil {
			return "", err
		}
		if version > 0 {
			if hasBlock(latest) {
				return versionWhere(version), nil
			}
			return "", nil
		}
	}
	if cur := p.fleet.cur.Load(); cur != nil && hasBlock(cur.conf) {
		return cmp.Or(strings.TrimPrefix(cur.where, "in "), "the configuration files"), nil
	}
	return "", nil
}

// entitlementsSource is documentSource of the entitlements.
func (p *Platform) entitlementsSource(ctx context.Context, workspaceID string) (string, error) {
	return p.documentSource(ctx, entitlementsDoc, workspaceID)
}

// connectionsSource is documentSource of the connection providers.
func (p *Platform) connectionsSource(ctx context.Context, workspaceID string) (string, error) {
	return p.documentSource(ctx, connectionsDoc, workspaceID)
}

// limitsSource is documentSource of the limits.
func (p *Platform) limitsSource(ctx context.Context, workspaceID string) (string, error) {
	return p.documentSource(ctx, limitsDoc, workspaceID)
}
