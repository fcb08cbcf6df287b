package server

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/sandbox/jsfunc"
	"github.com/quiverhq/quiver/schema"
	"github.com/quiverhq/quiver/store"
)

// The entity endpoints of the /v1 API (E1 to E6): workspaces, members, API keys, stored tools,
// and functions with their versions. Every read and write names the workspace of the
// request's key, so that a record of another workspace answers 404 like one that does not
// exist. A request is checked in full before anything is written: ids of the wrong kind,
// names, schemas, code and the records it refers to, each refusal naming its field. The rules
// themselves (last admin, runtime users, system tools, free names) are the store's: these
// handlers only translate, and check early what the store would refuse late, so that one
// request does not leave half of itself behind.

// registerEntities adds the endpoints of workspaces, members, API keys, tools and functions.
// It only describes them: s is used when a request is answered.
func (s *Server) registerEntities(api huma.API) {
	s.registerWorkspaces(api)
	s.registerMembers(api)
	s.registerKeys(api)
	s.registerTools(api)
	s.registerFunctions(api)
}

// ---- shared pieces

// nullString is a field of a PATCH body that tells absence (Set false: no change) from a
// value; null and "" both clear the field, since the store keeps "" for null.
type nullString struct {
	Set   bool
	Value string
}

// UnmarshalJSON is called for null too, which is what tells null from absence.
func (n *nullString) UnmarshalJSON(b []byte) error {
	n.Set = true
	if string(b) == "null" {
		n.Value = ""
		return nil
	}
	return json.Unmarshal(b, &n.Value)
}

// Schema describes the field as a string or null in the OpenAPI document.
func (nullString) Schema(huma.Registry) *huma.Schema {
	return &huma.Schema{Type: huma.TypeString, Nullable: true}
}

// fieldError is an answer naming the field at fault (loc: body.name, query.cursor, path.id):
// 400 for a value refused, 403 for a field the key may not set, 404 for a reference to a
// record the workspace does not have, 409 for a name already taken.
func fieldError(status int, loc, msg string) *ProblemDetails {
	return problemf(status, codeOf(status), loc+": "+msg, &ProblemField{Location: loc, Message: msg})
}

// storeFieldError is apiError naming the field at fault when the store refused the request
// (a 4xx answer); failures of the server's own name no field.
func storeFieldError(err error, what, loc string) error {
	err = apiError(err, what)
	if p, ok := err.(*ProblemDetails); ok && p.Status >= 400 && p.Status < 500 {
		p.Errors = append(p.Errors, &ProblemField{Location: loc, Message: strings.TrimPrefix(p.Detail, what+": ")})
	}
	return err
}

// checkID refuses an id that is not of the kind the field takes: a fun_ id given for a tool
// is a mistake worth naming, not a record to look for.
func checkID(loc, prefix, id string) error {
	rest, ok := strings.CutPrefix(id, prefix+"_")
	if ok && rest != "" && len(id) <= 64 && strings.IndexFunc(rest, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-')
	}) < 0 {
		return nil
	}
	return fieldError(http.StatusBadRequest, loc, "want a "+prefix+"_ id, got "+quoteShort(id))
}

// nonNil makes an empty list [] in JSON, not null.
func nonNil[T any](list []T) []T {
	if list == nil {
		return []T{}
	}
	return list
}

func quoteShort(s string) string {
	if len(s) > 70 {
		s = s[:64] + "..."
	}
	b, _ := json.Marshal(s)
	return string(b)
}

// ---- workspaces (E6)

type workspaceInput struct {
	ID string `path:"id" maxLength:"64" doc:"The workspace's id (wsp_...): the key's own."`
}

type workspaceOutput struct {
	Body *store.Workspace
}

type createWorkspaceInput struct {
	Body struct {
		Name          string `json:"name" minLength:"1" maxLength:"128" doc:"The workspace's name, for people."`
		RetentionTier string `json:"retention_tier,omitempty" enum:"short,medium,long,none" doc:"How long what is deleted in the workspace is kept: short 7 days, medium 30 (the default), long 90, none forever."`
	}
}

type createWorkspaceOutput struct {
	Body struct {
		Workspace *store.Workspace `json:"workspace"`
		Key       *store.APIKey    `json:"key" doc:"The record of the new workspace's first admin key, the caller's."`
		Secret    string           `json:"secret" doc:"The key itself, shown this once: only its hash is stored."`
	}
}

type updateWorkspaceInput struct {
	ID   string `path:"id" maxLength:"64" doc:"The workspace's id (wsp_...): the key's own."`
	Body struct {
		Name                 *string    `json:"name,omitempty" minLength:"1" maxLength:"128" doc:"A new name."`
		RetentionTier        *string    `json:"retention_tier,omitempty" enum:"short,medium,long,none" doc:"The tier snapshotted onto what is deleted from now on."`
		DefaultRuntimeUserID nullString `json:"default_runtime_user_id,omitempty" maxLength:"64" doc:"The member tools' functions run as when a tool names none (usr_...); null or empty for none."`
	}
}

func (s *Server) registerWorkspaces(api huma.API) {
	register(api, huma.Operation{OperationID: "create-workspace", Method: http.MethodPost, Path: "/v1/workspaces",
		Summary:       "Create a workspace administered by the key's user, with a first admin key for it",
		DefaultStatus: http.StatusCreated},
		func(ctx context.Context, in *createWorkspaceInput) (*createWorkspaceOutput, error) {
			p, err := s.admin(ctx, "use the workspace but not create others")
			if err != nil {
				return nil, err
			}
			if s.cfg.Auth != nil && p.WorkspaceID != s.cfg.WorkspaceID {
				// A tenant who could make workspaces could multiply every per-workspace cap
				// (sessions, streams, keys): the operator makes them.
				return nil, problemf(http.StatusForbidden, CodeForbidden,
					"workspaces are created by the admins of the server's own workspace (the operator's: the key quiver serve printed "+
						"at its first start, and the admin keys made in that workspace); ask the operator for one")
			}
			ent, err := s.entities()
			if err != nil {
				return nil, err
			}
			keys, err := s.apiKeys()
			if err != nil {
				return nil, err
			}
			if p.UserID == "" {
				return nil, problemf(http.StatusForbidden, CodeForbidden,
					"a new workspace is administered by the user of the key that creates it, and this server asks for no keys")
			}
			w := &store.Workspace{Name: in.Body.Name, RetentionTier: store.RetentionTier(cmp.Or(in.Body.RetentionTier, string(store.DefaultRetentionTier)))}
			if err := w.Check(); err != nil {
				return nil, fieldError(http.StatusBadRequest, "body.name", err.Error())
			}
			// Three writes, not one transaction: a failure after the first leaves a workspace
			// without members, which no key can reach; nothing else of it exists.
			if err := ent.CreateWorkspace(ctx, w); err != nil {
				return nil, apiError(err, "a workspace")
			}
			if err := ent.AddMember(ctx, &store.Membership{WorkspaceID: w.ID, UserID: p.UserID, Role: store.MemberRoleAdmin}); err != nil {
				return nil, apiError(err, "the admin of workspace "+w.ID)
			}
			k := &store.APIKey{WorkspaceID: w.ID, UserID: p.UserID, Name: "first admin key", Role: store.KeyRoleAdmin}
			secret, err := IssueAPIKey(ctx, keys, k)
			if err != nil {
				return nil, apiError(err, "the first key of workspace "+w.ID)
			}
			out := &createWorkspaceOutput{}
			out.Body.Workspace, out.Body.Key, out.Body.Secret = w, k, secret
			return out, nil
		})

	register(api, huma.Operation{OperationID: "get-workspace", Method: http.MethodGet, Path: "/v1/workspaces/{id}",
		Summary: "The key's workspace"}, func(ctx context.Context, in *workspaceInput) (*workspaceOutput, error) {
		ent, err := s.ownWorkspace(in.ID, s.workspaceID(ctx))
		if err != nil {
			return nil, err
		}
		w, err := ent.Workspace(ctx, in.ID)
		if err != nil {
			return nil, apiError(err, "workspace "+in.ID)
		}
		return &workspaceOutput{Body: w}, nil
	})

	register(api, huma.Operation{OperationID: "update-workspace", Method: http.MethodPatch, Path: "/v1/workspaces/{id}",
		Summary: "Rename the key's workspace, change its retention tier or its default runtime user"},
		func(ctx context.Context, in *updateWorkspaceInput) (*workspaceOutput, error) {
			p, err := s.admin(ctx, "use the workspace but not administer it")
			if err != nil {
				return nil, err
			}
			ent, err := s.ownWorkspace(in.ID, s.workspaceID(ctx))
			if err != nil {
				return nil, err
			}
			b := &in.Body
			if b.DefaultRuntimeUserID.Set && b.DefaultRuntimeUserID.Value != "" {
				if err := checkID("body.default_runtime_user_id", store.PrefixUser, b.DefaultRuntimeUserID.Value); err != nil {
					return nil, err
				}
				// Said in the API's words, and the same for a user of another workspace and
				// one who does not exist.
				if _, err := ent.Member(ctx, in.ID, b.DefaultRuntimeUserID.Value); errors.Is(err, store.ErrNotFound) {
					return nil, fieldError(http.StatusBadRequest, "body.default_runtime_user_id",
						"user "+b.DefaultRuntimeUserID.Value+" is not a member of this workspace: the default runtime user must be one")
				} else if err != nil {
					return nil, apiError(err, "the members of workspace "+in.ID)
				}
			}
			w, err := ent.UpdateWorkspace(ctx, in.ID, p.UserID, func(w *store.Workspace) error {
				if b.Name != nil {
					w.Name = *b.Name
				}
				if b.RetentionTier != nil {
					w.RetentionTier = store.RetentionTier(*b.RetentionTier)
				}
				if b.DefaultRuntimeUserID.Set {
					w.DefaultRuntimeUserID = b.DefaultRuntimeUserID.Value
				}
				if b.Name != nil {
					if err := w.Check(); err != nil {
						return fieldError(http.StatusBadRequest, "body.name", err.Error())
					}
				}
				return nil
			})
			if err != nil {
				if b.DefaultRuntimeUserID.Set && (errors.Is(err, store.ErrInvalid) || errors.Is(err, store.ErrForbidden)) {
					return nil, storeFieldError(err, "workspace "+in.ID, "body.default_runtime_user_id")
				}
				return nil, apiError(err, "workspace "+in.ID)
			}
			return &workspaceOutput{Body: w}, nil
		})
}

// ownWorkspace checks a workspace id given in a path: only the key's own workspace is there
// for it (any other is 404, whether or not it exists).
func (s *Server) ownWorkspace(id, own string) (store.Entities, error) {
	if err := checkID("path.id", store.PrefixWorkspace, id); err != nil {
		return nil, err
	}
	if id != own {
		return nil, problemf(http.StatusNotFound, CodeNotFound, "no workspace "+id+" for this key")
	}
	return s.entities()
}

// ---- members (E6)

// memberRecord is a member of the workspace: the membership and who the user is.
type memberRecord struct {
	WorkspaceID string           `json:"workspace_id"`
	UserID      string           `json:"user_id" doc:"usr_..."`
	Email       string           `json:"email"`
	Name        string           `json:"name"`
	Role        store.MemberRole `json:"role" enum:"admin,member"`
	CreatedAt   time.Time        `json:"created_at" doc:"When the user became a member."`
}

type memberOutput struct {
	Body *memberRecord
}

type membersOutput struct {
	Body struct {
		Members []*memberRecord `json:"members"`
	}
}

type addMemberInput struct {
	Body struct {
		Email string `json:"email" minLength:"3" maxLength:"254" doc:"The user's email: an unknown one makes a new user, a known one adds that user."`
		Name  string `json:"name,omitempty" maxLength:"200" doc:"The new user's name (ignored for a user who exists)."`
		Role  string `json:"role,omitempty" enum:"admin,member" default:"member" doc:"What the member may do: admin administers the workspace."`
	}
}

type memberPathInput struct {
	UserID string `path:"user_id" maxLength:"64" doc:"The member's user id (usr_...)."`
}

type setRoleInput struct {
	UserID string `path:"user_id" maxLength:"64" doc:"The member's user id (usr_...)."`
	Body   struct {
		Role string `json:"role" enum:"admin,member" doc:"The member's new role."`
	}
}

func (s *Server) registerMembers(api huma.API) {
	register(api, huma.Operation{OperationID: "list-members", Method: http.MethodGet, Path: "/v1/members",
		Summary: "The workspace's members, oldest first"}, func(ctx context.Context, _ *struct{}) (*membersOutput, error) {
		ent, err := s.entities()
		if err != nil {
			return nil, err
		}
		ms, err := ent.Members(ctx, s.workspaceID(ctx))
		if err != nil {
			return nil, apiError(err, "the members")
		}
		out := &membersOutput{}
		out.Body.Members = make([]*memberRecord, 0, len(ms))
		for _, m := range ms {
			r, err := memberOf(ctx, ent, m)
			if err != nil {
				return nil, err
			}
			out.Body.Members = append(out.Body.Members, r)
		}
		return out, nil
	})

	register(api, huma.Operation{OperationID: "add-member", Method: http.MethodPost, Path: "/v1/members",
		Summary: "Add a member by email, making the user when the email is new", DefaultStatus: http.StatusCreated},
		func(ctx context.Context, in *addMemberInput) (*memberOutput, error) {
			if _, err := s.admin(ctx, "use the workspace but not administer its members"); err != nil {
				return nil, err
			}
			ent, err := s.entities()
			if err != nil {
				return nil, err
			}
			email, err := store.NormalizeEmail(in.Body.Email)
			if err != nil {
				return nil, fieldError(http.StatusBadRequest, "body.email", "not an email address: want local@domain")
			}
			u, err := ent.UserByEmail(ctx, email)
			if errors.Is(err, store.ErrNotFound) {
				u = &store.User{Email: strings.TrimSpace(in.Body.Email), Name: in.Body.Name}
				if err = ent.CreateUser(ctx, u); errors.Is(err, store.ErrConflict) {
					u, err = ent.UserByEmail(ctx, email) // made meanwhile by another request
				}
			}
			if err != nil {
				return nil, storeFieldError(err, "the user "+email, "body.email")
			}
			m := &store.Membership{WorkspaceID: s.workspaceID(ctx), UserID: u.ID, Role: store.MemberRole(cmp.Or(in.Body.Role, string(store.MemberRoleMember)))}
			if err := ent.AddMember(ctx, m); err != nil {
				return nil, storeFieldError(err, "the membership of "+email, "body.email")
			}
			return &memberOutput{Body: memberRecordOf(m, u)}, nil
		})

	register(api, huma.Operation{OperationID: "set-member-role", Method: http.MethodPatch, Path: "/v1/members/{user_id}",
		Summary: "Change a member's role; the workspace keeps at least one admin"},
		func(ctx context.Context, in *setRoleInput) (*memberOutput, error) {
			if _, err := s.admin(ctx, "use the workspace but not administer its members"); err != nil {
				return nil, err
			}
			if err := checkID("path.user_id", store.PrefixUser, in.UserID); err != nil {
				return nil, err
			}
			ent, err := s.entities()
			if err != nil {
				return nil, err
			}
			ws := s.workspaceID(ctx)
			if err := ent.SetMemberRole(ctx, ws, in.UserID, store.MemberRole(in.Body.Role)); err != nil {
				return nil, storeFieldError(err, "member "+in.UserID, "body.role")
			}
			m, err := ent.Member(ctx, ws, in.UserID)
			if err != nil {
				return nil, apiError(err, "member "+in.UserID)
			}
			r, err := memberOf(ctx, ent, m)
			if err != nil {
				return nil, err
			}
			return &memberOutput{Body: r}, nil
		})

	register(api, huma.Operation{OperationID: "remove-member", Method: http.MethodDelete, Path: "/v1/members/{user_id}",
		Summary:       "Remove a member: not the last admin, nor a user tools run as (change those first)",
		DefaultStatus: http.StatusNoContent},
		func(ctx context.Context, in *memberPathInput) (*struct{}, error) {
			if _, err := s.admin(ctx, "use the workspace but not administer its members"); err != nil {
				return nil, err
			}
			if err := checkID("path.user_id", store.PrefixUser, in.UserID); err != nil {
				return nil, err
			}
			ent, err := s.entities()
			if err != nil {
				return nil, err
			}
			if err := ent.RemoveMember(ctx, s.workspaceID(ctx), in.UserID); err != nil {
				return nil, apiError(err, "member "+in.UserID)
			}
			return nil, nil
		})
}

func memberOf(ctx context.Context, ent store.Entities, m *store.Membership) (*memberRecord, error) {
	u, err := ent.User(ctx, m.UserID)
	if err != nil {
		return nil, apiError(err, "user "+m.UserID)
	}
	return memberRecordOf(m, u), nil
}

func memberRecordOf(m *store.Membership, u *store.User) *memberRecord {
	return &memberRecord{WorkspaceID: m.WorkspaceID, UserID: m.UserID, Email: u.Email, Name: u.Name, Role: m.Role, CreatedAt: m.CreatedAt}
}

// ---- API keys (E6)

// IssueAPIKey makes a new API key for k's workspace, user, name, role and expiry, stores its
// record (setting k's Prefix, Hash, ID and CreatedAt) and returns the key itself, to be shown
// once: the store keeps only its hash. The store refuses a user who is not a member, or a role
// above what the member may give a key (see store.APIKeys).
func IssueAPIKey(ctx context.Context, keys store.APIKeys, k *store.APIKey) (string, error) {
	secret, prefix, hash := NewAPIKey()
	k.Prefix, k.Hash = prefix, hash
	if err := keys.CreateAPIKey(ctx, k); err != nil {
		return "", err
	}
	return secret, nil
}

// MaxKeysPerWorkspace is the most API keys a workspace may have working at once: its caps on
// sessions and streams hold whatever keys it makes, and this bounds what one admin can make.
const MaxKeysPerWorkspace = 100

// roomForKey answers 409 when the workspace has MaxKeysPerWorkspace working keys. Two keys
// made at the same instant can both pass: the bound may be crossed by the few requests that
// race it, never more.
func (s *Server) roomForKey(ctx context.Context, keys store.APIKeys, ws string) error {
	all, err := keys.APIKeys(ctx, ws)
	if err != nil {
		return apiError(err, "the workspace's keys")
	}
	now, working := time.Now(), 0
	for _, k := range all {
		if k.Usable(now) {
			working++
		}
	}
	if working >= MaxKeysPerWorkspace {
		return problemf(http.StatusConflict, CodeConflict, fmt.Sprintf(
			"the workspace has %d working API keys, the most it may: revoke one first (DELETE /v1/keys/{id})", working))
	}
	return nil
}

// apiKeys is the store's key storage, or a 503 when it has none.
func (s *Server) apiKeys() (store.APIKeys, error) {
	keys, ok := s.cfg.Store.(store.APIKeys)
	if !ok {
		return nil, problemf(http.StatusServiceUnavailable, CodeUnavailable, "this server's store keeps no API keys")
	}
	return keys, nil
}

type keysOutput struct {
	Body struct {
		Keys []*store.APIKey `json:"keys" doc:"Newest first; never the keys themselves."`
	}
}

type createKeyInput struct {
	Body struct {
		UserID    string     `json:"user_id,omitempty" maxLength:"64" doc:"The member the key acts as (usr_...); the caller's user when empty."`
		Role      string     `json:"role" enum:"admin,member,viewer" doc:"What the key may do: no more than its member may (a member's key is member or viewer)."`
		Name      string     `json:"name" minLength:"1" maxLength:"100" doc:"What the key is for, to recognise it in the list."`
		ExpiresAt *time.Time `json:"expires_at,omitempty" doc:"When the key stops working, in the future; never when absent."`
	}
}

type createKeyOutput struct {
	Body struct {
		Key    *store.APIKey `json:"key"`
		Secret string        `json:"secret" doc:"The key itself, shown this once: only its hash is stored."`
	}
}

type keyInput struct {
	ID string `path:"id" maxLength:"64" doc:"The key's record id (key_...), as the list shows it."`
}

type keyOutput struct {
	Body *store.APIKey
}

func (s *Server) registerKeys(api huma.API) {
	register(api, huma.Operation{OperationID: "list-keys", Method: http.MethodGet, Path: "/v1/keys",
		Summary: "The workspace's API keys, newest first (their records, never the keys)"},
		func(ctx context.Context, _ *struct{}) (*keysOutput, error) {
			if _, err := s.admin(ctx, "use the workspace but not list its keys"); err != nil {
				return nil, err
			}
			keys, err := s.apiKeys()
			if err != nil {
				return nil, err
			}
			ks, err := keys.APIKeys(ctx, s.workspaceID(ctx))
			if err != nil {
				return nil, apiError(err, "the keys")
			}
			out := &keysOutput{}
			out.Body.Keys = nonNil(ks)
			return out, nil
		})

	register(api, huma.Operation{OperationID: "create-key", Method: http.MethodPost, Path: "/v1/keys",
		Summary: "Make an API key for a member; the key is in the answer, once", DefaultStatus: http.StatusCreated},
		func(ctx context.Context, in *createKeyInput) (*createKeyOutput, error) {
			p, err := s.admin(ctx, "use the workspace but not make keys")
			if err != nil {
				return nil, err
			}
			keys, err := s.apiKeys()
			if err != nil {
				return nil, err
			}
			ent, err := s.entities()
			if err != nil {
				return nil, err
			}
			b := &in.Body
			userID := cmp.Or(b.UserID, p.UserID)
			if err := checkID("body.user_id", store.PrefixUser, userID); err != nil {
				return nil, err
			}
			ws := s.workspaceID(ctx)
			// The store holds the same rules; checked here first to name the field at fault.
			m, err := ent.Member(ctx, ws, userID)
			if errors.Is(err, store.ErrNotFound) {
				return nil, fieldError(http.StatusBadRequest, "body.user_id", "user "+userID+" is not a member of this workspace")
			}
			if err != nil {
				return nil, apiError(err, "member "+userID)
			}
			role := store.KeyRole(b.Role)
			if most := store.MemberKeyRole(m.Role); !most.Allows(role) {
				return nil, fieldError(http.StatusBadRequest, "body.role",
					"user "+userID+" is a "+string(m.Role)+" of the workspace: their keys may be at most "+string(most))
			}
			if b.ExpiresAt != nil && !b.ExpiresAt.After(time.Now()) {
				return nil, fieldError(http.StatusBadRequest, "body.expires_at", "the key would expire before it is made: want a time in the future")
			}
			if err := s.roomForKey(ctx, keys, ws); err != nil {
				return nil, err
			}
			k := &store.APIKey{WorkspaceID: ws, UserID: userID, Name: b.Name, Role: role, ExpiresAt: b.ExpiresAt}
			secret, err := IssueAPIKey(ctx, keys, k)
			if err != nil {
				return nil, apiError(err, "a key")
			}
			out := &createKeyOutput{}
			out.Body.Key, out.Body.Secret = k, secret
			return out, nil
		})

	register(api, huma.Operation{OperationID: "revoke-key", Method: http.MethodDelete, Path: "/v1/keys/{id}",
		Summary: "Revoke an API key for good; servers refuse it within a second"},
		func(ctx context.Context, in *keyInput) (*keyOutput, error) {
			if _, err := s.admin(ctx, "use the workspace but not revoke keys"); err != nil {
				return nil, err
			}
			if err := checkID("path.id", store.PrefixAPIKey, in.ID); err != nil {
				return nil, err
			}
			keys, err := s.apiKeys()
			if err != nil {
				return nil, err
			}
			k, err := keys.RevokeAPIKey(ctx, s.workspaceID(ctx), in.ID)
			if err != nil {
				return nil, apiError(err, "API key "+in.ID)
			}
			return &keyOutput{Body: k}, nil
		})
}

// ---- tools (E1, E3, E4, E5)

// toolRecord is a stored tool as the API answers it: the fields of seed 004, null for what
// is unset. It is store.Tool's JSON form, spelled out so that the OpenAPI document describes
// what is sent.
type toolRecord struct {
	ID                   string               `json:"id" doc:"tol_..."`
	WorkspaceID          *string              `json:"workspace_id" nullable:"true" doc:"null for a system tool."`
	Name                 string               `json:"name" doc:"The name the model sees."`
	Description          *string              `json:"description" nullable:"true" doc:"When to use the tool, for the model."`
	Target               store.ToolTarget     `json:"target" enum:"server,client"`
	FunctionID           *string              `json:"function_id" nullable:"true" doc:"The function a server tool runs; null for a client tool."`
	FunctionVersionID    *string              `json:"function_version_id" nullable:"true" doc:"The pinned version; null follows the function's default version."`
	InputSchemaID        string               `json:"input_schema_id"`
	OutputSchemaID       string               `json:"output_schema_id"`
	Examples             []store.ToolExample  `json:"examples" nullable:"true"`
	RequiresConfirmation bool                 `json:"requires_confirmation"`
	Enabled              bool                 `json:"enabled"`
	System               bool                 `json:"system" doc:"A built-in tool, which cannot be edited or deleted."`
	CreatedBy            *string              `json:"created_by" nullable:"true"`
	RuntimeUserID        *string              `json:"runtime_user_id" nullable:"true" doc:"The member the function runs as; null for the workspace's default."`
	DeletedAt            *time.Time           `json:"deleted_at" nullable:"true"`
	RetentionTier        *store.RetentionTier `json:"retention_tier" nullable:"true" doc:"short, medium, long or none: snapshotted by the deletion; null while active."`
	CreatedAt            time.Time            `json:"created_at"`
	UpdatedAt            time.Time            `json:"updated_at"`
}

func orNull(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func toolRecordOf(t *store.Tool) *toolRecord {
	r := &toolRecord{
		ID: t.ID, WorkspaceID: orNull(t.WorkspaceID), Name: t.Name, Description: orNull(t.Description), Target: t.Target,
		FunctionID: orNull(t.FunctionID), FunctionVersionID: orNull(t.FunctionVersionID), InputSchemaID: t.InputSchemaID,
		OutputSchemaID: t.OutputSchemaID, Examples: t.Examples, RequiresConfirmation: t.RequiresConfirmation,
		Enabled: t.Enabled, System: t.System, CreatedBy: orNull(t.CreatedBy), RuntimeUserID: orNull(t.RuntimeUserID),
		DeletedAt: t.DeletedAt, CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt,
	}
	if t.RetentionTier != "" {
		tier := t.RetentionTier
		r.RetentionTier = &tier
	}
	return r
}

type toolOutput struct {
	Body *toolRecord
}

type toolInput struct {
	ID string `path:"id" maxLength:"64" doc:"The tool's id (tol_...)."`
}

type createToolInput struct {
	Body struct {
		Name                 string              `json:"name" minLength:"1" maxLength:"128" doc:"The name the model sees: free among the workspace's active tools and the server's own."`
		Description          string              `json:"description,omitempty" maxLength:"10000" doc:"When to use the tool, for the model; the input schema's description when empty."`
		Target               string              `json:"target" enum:"server,client" doc:"server runs a function of the workspace; client tools are run by the client."`
		FunctionID           string              `json:"function_id,omitempty" maxLength:"64" doc:"The function a server tool runs (fun_...)."`
		FunctionVersionID    string              `json:"function_version_id,omitempty" maxLength:"64" doc:"A version of the function to pin (fnv_...); empty follows its default version."`
		InputSchema          json.RawMessage     `json:"input_schema" doc:"The JSON Schema (an object) of the arguments: what the model sees and calls are validated against."`
		OutputSchema         json.RawMessage     `json:"output_schema,omitempty" doc:"The JSON Schema (an object) of the result; any result when absent."`
		Examples             []store.ToolExample `json:"examples,omitempty" maxItems:"20" doc:"Few-shot calls: args (validated against the input schema) and an optional result."`
		RequiresConfirmation bool                `json:"requires_confirmation,omitempty" doc:"Each call waits for a person's approval."`
		Enabled              *bool               `json:"enabled,omitempty" doc:"false hides the tool from the model; true when absent."`
		RuntimeUserID        string              `json:"runtime_user_id,omitempty" maxLength:"64" doc:"The member the function runs as (usr_...), set by admins only; the workspace's default when empty."`
	}
}

type updateToolInput struct {
	ID   string `path:"id" maxLength:"64" doc:"The tool's id (tol_...)."`
	Body struct {
		Name                 *string              `json:"name,omitempty" minLength:"1" maxLength:"128"`
		Description          nullString           `json:"description,omitempty" maxLength:"10000" doc:"null or empty: the input schema's description."`
		Target               *string              `json:"target,omitempty" enum:"server,client"`
		FunctionID           nullString           `json:"function_id,omitempty" maxLength:"64" doc:"null or empty for none (a client tool)."`
		FunctionVersionID    nullString           `json:"function_version_id,omitempty" maxLength:"64" doc:"A version to pin (fnv_...); null or empty follows the function's default version."`
		InputSchema          json.RawMessage      `json:"input_schema,omitempty" doc:"A new input schema (a JSON Schema object)."`
		OutputSchema         json.RawMessage      `json:"output_schema,omitempty" doc:"A new output schema (a JSON Schema object, or true for any result)."`
		Examples             *[]store.ToolExample `json:"examples,omitempty" maxItems:"20" doc:"The new examples; [] for none."`
		RequiresConfirmation *bool                `json:"requires_confirmation,omitempty"`
		Enabled              *bool                `json:"enabled,omitempty"`
		RuntimeUserID        nullString           `json:"runtime_user_id,omitempty" maxLength:"64" doc:"Admins only; null or empty for the workspace's default."`
	}
}

type deleteToolInput struct {
	ID            string `path:"id" maxLength:"64" doc:"The tool's id (tol_...)."`
	RetentionTier string `query:"retention_tier" enum:"short,medium,long,none" doc:"How long the deleted tool is kept (short 7 days, medium 30, long 90, none forever); the workspace's tier when absent."`
}

type listToolsInput struct {
	Limit                int    `query:"limit" minimum:"1" maximum:"100" default:"20" doc:"Tools per page."`
	Cursor               string `query:"cursor" maxLength:"512" doc:"Where the page starts: the next_cursor of the page before, with the same filters; empty for the first."`
	FunctionID           string `query:"function_id" maxLength:"64" doc:"Only the tools running this function (fun_...)."`
	Target               string `query:"target" enum:"server,client" doc:"Only the tools of this target."`
	Name                 string `query:"name" maxLength:"128" doc:"Only the tool of this name, or with names starting with it (name_prefix)."`
	NamePrefix           bool   `query:"name_prefix" doc:"name is a prefix."`
	RequiresConfirmation string `query:"requires_confirmation" enum:"true,false" doc:"Only the tools whose calls wait (true) or do not wait (false) for approval."`
	IncludeDeleted       string `query:"include_deleted" enum:"false,true,only" default:"false" doc:"Also the deleted tools (true), or only them (only)."`
	IncludeSystem        bool   `query:"include_system" doc:"Also the system tools."`
	Agent                string `query:"agent" maxLength:"128" doc:"Only the tools this agent may call (its bound tools, allow and deny lists), of those the workspace serves now."`
}

type listToolsOutput struct {
	Body struct {
		Tools      []*toolRecord `json:"tools"`
		NextCursor string        `json:"next_cursor,omitempty" doc:"The cursor of the next page; absent on the last."`
	}
}

// anyOutput is the output schema stored for a tool created without one: any result.
var anyOutput = json.RawMessage("true")

func (s *Server) registerTools(api huma.API) {
	register(api, huma.Operation{OperationID: "list-tools", Method: http.MethodGet, Path: "/v1/tools",
		Summary: "The workspace's stored tools, oldest first, a page at a time"}, s.listTools)
	register(api, huma.Operation{OperationID: "create-tool", Method: http.MethodPost, Path: "/v1/tools",
		Summary: "Store a tool: a function of the workspace (server) or one the client runs", DefaultStatus: http.StatusCreated}, s.createTool)
	register(api, huma.Operation{OperationID: "get-tool", Method: http.MethodGet, Path: "/v1/tools/{id}",
		Summary: "A stored tool of the workspace (deleted ones included) or a system tool"},
		func(ctx context.Context, in *toolInput) (*toolOutput, error) {
			if err := checkID("path.id", store.PrefixTool, in.ID); err != nil {
				return nil, err
			}
			ent, err := s.entities()
			if err != nil {
				return nil, err
			}
			t, err := ent.Tool(ctx, s.workspaceID(ctx), in.ID)
			if err != nil {
				return nil, apiError(err, "tool "+in.ID)
			}
			return &toolOutput{Body: toolRecordOf(t)}, nil
		})
	register(api, huma.Operation{OperationID: "update-tool", Method: http.MethodPatch, Path: "/v1/tools/{id}",
		Summary: "Change a stored tool: the fields given; system tools cannot be changed"}, s.updateTool)
	register(api, huma.Operation{OperationID: "delete-tool", Method: http.MethodDelete, Path: "/v1/tools/{id}",
		Summary: "Delete a stored tool: kept for its retention tier, then purged"},
		func(ctx context.Context, in *deleteToolInput) (*toolOutput, error) {
			if _, err := s.member(ctx, "read tools but not delete them"); err != nil {
				return nil, err
			}
			if err := checkID("path.id", store.PrefixTool, in.ID); err != nil {
				return nil, err
			}
			ent, err := s.entities()
			if err != nil {
				return nil, err
			}
			ws := s.workspaceID(ctx)
			t, err := ent.DeleteTool(ctx, ws, in.ID, store.RetentionTier(in.RetentionTier))
			if err != nil {
				return nil, apiError(err, "tool "+in.ID)
			}
			s.toolsChanged(ctx, ws)
			return &toolOutput{Body: toolRecordOf(t)}, nil
		})
}

func (s *Server) listTools(ctx context.Context, in *listToolsInput) (*listToolsOutput, error) {
	ent, err := s.entities()
	if err != nil {
		return nil, err
	}
	if in.FunctionID != "" {
		if err := checkID("query.function_id", store.PrefixFunction, in.FunctionID); err != nil {
			return nil, err
		}
	}
	if in.NamePrefix && in.Name == "" {
		return nil, fieldError(http.StatusBadRequest, "query.name", "name_prefix needs a name to be the prefix")
	}
	f := store.ToolFilter{
		WorkspaceID: s.workspaceID(ctx), IncludeSystem: in.IncludeSystem, FunctionID: in.FunctionID,
		Target: store.ToolTarget(in.Target), Name: in.Name, NamePrefix: in.NamePrefix,
		Deleted: store.DeletedFilter(cmp.Or(in.IncludeDeleted, string(store.DeletedExclude))), Limit: in.Limit, Cursor: in.Cursor,
	}
	if in.RequiresConfirmation != "" {
		rc := in.RequiresConfirmation == "true"
		f.RequiresConfirmation = &rc
	}
	if in.Agent != "" {
		if f.Names, err = s.agentToolNames(ctx, in.Agent); err != nil {
			return nil, err
		}
	}
	c, ok, err := f.DecodeCursor()
	if err == nil && ok && checkID("", store.PrefixTool, c.ID) != nil {
		// The store's cursors are not signed: one whose position was edited holds a tool id
		// only by chance.
		err = errors.New("the cursor holds no tool's position")
	}
	if err != nil {
		return nil, fieldError(http.StatusBadRequest, "query.cursor", strings.TrimSuffix(err.Error(), ": "+store.ErrInvalid.Error())+
			": pass the next_cursor of the page before, with the same filters")
	}
	page, err := ent.ListTools(ctx, f)
	if err != nil {
		return nil, apiError(err, "the tool page")
	}
	out := &listToolsOutput{}
	out.Body.Tools = make([]*toolRecord, len(page.Tools))
	for i, t := range page.Tools {
		out.Body.Tools[i] = toolRecordOf(t)
	}
	out.Body.NextCursor = page.NextCursor
	return out, nil
}

// agentToolNames are the names of the tools the agent may call of those the workspace serves
// now (P1: its bound tools, narrowed by its allow and deny lists; globs resolved), for the
// store's Names filter: agents are definitions the server loads, not stored records.
func (s *Server) agentToolNames(ctx context.Context, name string) ([]string, error) {
	if !s.agentsOn() {
		return nil, fieldError(http.StatusBadRequest, "query.agent", "this server runs no agents (quiver serve --agents DIR)")
	}
	a, err := s.p.Agent(ctx, name)
	if err != nil {
		return nil, fieldError(http.StatusBadRequest, "query.agent", err.Error())
	}
	bound := a.Prompt.Tools
	if bound == nil {
		bound = []string{} // an agent that lists no tools has none
	}
	policy := quiver.Policy{Bound: bound, Allow: a.Prompt.Allow, Deny: a.Prompt.Deny}
	names := []string{}
	for _, t := range policy.Effective(s.tenant(ctx, s.workspaceID(ctx)).registry) {
		names = append(names, t.Name())
	}
	if len(names) > store.MaxFilterNames {
		return nil, fieldError(http.StatusBadRequest, "query.agent", fmt.Sprintf(
			"agent %s may call %d tools, more than the %d an agent filter lists: filter by name instead", name, len(names), store.MaxFilterNames))
	}
	return names, nil
}

func (s *Server) createTool(ctx context.Context, in *createToolInput) (*toolOutput, error) {
	p, err := s.member(ctx, "read tools but not create them")
	if err != nil {
		return nil, err
	}
	ent, err := s.entities()
	if err != nil {
		return nil, err
	}
	ws := s.workspaceID(ctx)
	b := &in.Body
	t := &store.Tool{
		WorkspaceID: ws, Name: b.Name, Description: b.Description, Target: store.ToolTarget(b.Target),
		FunctionID: b.FunctionID, FunctionVersionID: b.FunctionVersionID, Examples: b.Examples,
		RequiresConfirmation: b.RequiresConfirmation, Enabled: b.Enabled == nil || *b.Enabled,
		CreatedBy: p.UserID, RuntimeUserID: b.RuntimeUserID,
	}
	inDoc, outDoc := b.InputSchema, b.OutputSchema
	if outDoc == nil {
		outDoc = anyOutput
	}
	if err := s.checkTool(ctx, ent, t, nil, inDoc, outDoc); err != nil {
		return nil, err
	}
	// Everything is checked: the writes left can only fail on a race (a name taken
	// meanwhile) or the store, and then leave at most unreferenced schemas, which are
	// immutable and harmless.
	if t.InputSchemaID, err = s.newSchema(ctx, ent, ws, inDoc); err != nil {
		return nil, err
	}
	if t.OutputSchemaID, err = s.newSchema(ctx, ent, ws, outDoc); err != nil {
		return nil, err
	}
	if err := ent.CreateTool(ctx, t); err != nil {
		return nil, storeToolError(err, "tool "+t.Name)
	}
	s.toolsChanged(ctx, ws)
	return &toolOutput{Body: toolRecordOf(t)}, nil
}

func (s *Server) updateTool(ctx context.Context, in *updateToolInput) (*toolOutput, error) {
	p, err := s.member(ctx, "read tools but not change them")
	if err != nil {
		return nil, err
	}
	if err := checkID("path.id", store.PrefixTool, in.ID); err != nil {
		return nil, err
	}
	ent, err := s.entities()
	if err != nil {
		return nil, err
	}
	ws := s.workspaceID(ctx)
	before, err := ent.Tool(ctx, ws, in.ID)
	if err != nil {
		return nil, apiError(err, "tool "+in.ID)
	}
	switch {
	case before.System:
		return nil, problemf(http.StatusForbidden, CodeForbidden, "tool "+in.ID+" is a system tool: system tools cannot be edited")
	case before.DeletedAt != nil:
		return nil, problemf(http.StatusNotFound, CodeNotFound, "tool "+in.ID+" is deleted")
	}
	b := &in.Body
	apply := func(t *store.Tool) {
		if b.Name != nil {
			t.Name = *b.Name
		}
		if b.Description.Set {
			t.Description = b.Description.Value
		}
		if b.Target != nil {
			t.Target = store.ToolTarget(*b.Target)
		}
		if b.FunctionID.Set {
			t.FunctionID = b.FunctionID.Value
		}
		if b.FunctionVersionID.Set {
			t.FunctionVersionID = b.FunctionVersionID.Value
		}
		if b.Examples != nil {
			t.Examples = *b.Examples
		}
		if b.RequiresConfirmation != nil {
			t.RequiresConfirmation = *b.RequiresConfirmation
		}
		if b.Enabled != nil {
			t.Enabled = *b.Enabled
		}
		if b.RuntimeUserID.Set {
			t.RuntimeUserID = b.RuntimeUserID.Value
		}
	}
	after := before.Clone()
	apply(after)
	// The whole tool as it would be is checked, with its stored schemas where the request
	// gives no new ones: a change of name or description must still make a tool the server
	// can serve.
	inDoc, outDoc := []byte(b.InputSchema), []byte(b.OutputSchema)
	if inDoc == nil {
		if inDoc, err = storedSchema(ctx, ent, ws, before.InputSchemaID); err != nil {
			return nil, err
		}
	}
	if outDoc == nil {
		if outDoc, err = storedSchema(ctx, ent, ws, before.OutputSchemaID); err != nil {
			return nil, err
		}
	}
	if err := s.checkTool(ctx, ent, after, before, inDoc, outDoc); err != nil {
		return nil, err
	}
	inID, outID := before.InputSchemaID, before.OutputSchemaID
	if b.InputSchema != nil {
		if inID, err = s.newSchema(ctx, ent, ws, b.InputSchema); err != nil {
			return nil, err
		}
	}
	if b.OutputSchema != nil {
		if outID, err = s.newSchema(ctx, ent, ws, b.OutputSchema); err != nil {
			return nil, err
		}
	}
	t, err := ent.UpdateTool(ctx, ws, in.ID, p.UserID, func(t *store.Tool) error {
		apply(t)
		t.InputSchemaID, t.OutputSchemaID = inID, outID
		return nil
	})
	if err != nil {
		return nil, storeToolError(err, "tool "+in.ID)
	}
	s.toolsChanged(ctx, ws)
	return &toolOutput{Body: toolRecordOf(t)}, nil
}

// storeToolError maps the store's refusal of a tool, naming the name for a clash (the only
// conflict a tool write has).
func storeToolError(err error, what string) error {
	if errors.Is(err, store.ErrConflict) {
		return storeFieldError(err, what, "body.name")
	}
	return apiError(err, what)
}

// checkTool checks t, a tool to create (before nil) or the result of a change to before,
// with the schema documents it would have, the way the store and then the server will: every
// refusal names its field, and nothing has been written when one comes.
func (s *Server) checkTool(ctx context.Context, ent store.Entities, t, before *store.Tool, inDoc, outDoc []byte) error {
	ws := t.WorkspaceID
	for _, id := range []struct{ loc, prefix, id string }{
		{"body.function_id", store.PrefixFunction, t.FunctionID},
		{"body.function_version_id", store.PrefixFunctionVersion, t.FunctionVersionID},
		{"body.runtime_user_id", store.PrefixUser, t.RuntimeUserID},
	} {
		if id.id != "" {
			if err := checkID(id.loc, id.prefix, id.id); err != nil {
				return err
			}
		}
	}
	renamed := before == nil || before.Name != t.Name
	if renamed {
		if err := quiver.CheckName(t.Name); err != nil {
			return fieldError(http.StatusBadRequest, "body.name", quiver.NameRule)
		}
		if err := store.CheckName("tool", t.Name); err != nil {
			return fieldError(http.StatusBadRequest, "body.name", err.Error())
		}
		if reg := s.cfg.Registry; reg != nil {
			// A stored tool of the same name would shadow the server's own in the workspace.
			if _, ok := reg.Lookup(t.Name); ok {
				return fieldError(http.StatusConflict, "body.name", "the server serves a tool named "+quoteShort(t.Name)+" already: choose another name")
			}
		}
		page, err := ent.ListTools(ctx, store.ToolFilter{WorkspaceID: ws, Name: t.Name, Limit: 1})
		if err != nil {
			return apiError(err, "the tools named "+t.Name)
		}
		if len(page.Tools) > 0 && page.Tools[0].ID != t.ID {
			return fieldError(http.StatusConflict, "body.name", "tool "+page.Tools[0].ID+" of the workspace is named "+quoteShort(t.Name)+" already")
		}
	}
	switch {
	case t.Target == store.TargetServer && t.FunctionID == "":
		return fieldError(http.StatusBadRequest, "body.function_id", "a server tool runs a function: give its id (fun_...)")
	case t.Target == store.TargetClient && t.FunctionID != "":
		return fieldError(http.StatusBadRequest, "body.function_id", "a client tool runs no function: leave it out (or null)")
	case t.Target == store.TargetClient && t.FunctionVersionID != "":
		return fieldError(http.StatusBadRequest, "body.function_version_id", "a client tool runs no function: leave it out (or null)")
	}
	if t.FunctionID != "" {
		f, err := ent.Function(ctx, ws, t.FunctionID)
		if errors.Is(err, store.ErrNotFound) || err == nil && f.WorkspaceID != ws {
			return fieldError(http.StatusNotFound, "body.function_id", "no function "+t.FunctionID+" in this workspace")
		}
		if err != nil {
			return apiError(err, "function "+t.FunctionID)
		}
		if t.FunctionVersionID != "" {
			v, err := ent.FunctionVersion(ctx, ws, t.FunctionVersionID)
			if errors.Is(err, store.ErrNotFound) {
				return fieldError(http.StatusNotFound, "body.function_version_id", "no function version "+t.FunctionVersionID+" in this workspace")
			}
			if err != nil {
				return apiError(err, "function version "+t.FunctionVersionID)
			}
			if v.FunctionID != t.FunctionID {
				return fieldError(http.StatusBadRequest, "body.function_version_id", "version "+v.ID+" is a version of function "+v.FunctionID+", not of "+t.FunctionID)
			}
		} else if f.DefaultVersionID == "" {
			return fieldError(http.StatusBadRequest, "body.function_id", "function "+f.ID+" has no version yet: add one (POST /v1/functions/"+f.ID+"/versions) before a tool runs it")
		}
	}
	if before == nil && t.RuntimeUserID != "" || before != nil && before.RuntimeUserID != t.RuntimeUserID {
		if _, err := s.admin(ctx, "create and change tools but not set the user they run as"); err != nil {
			p := err.(*ProblemDetails)
			p.Errors = append(p.Errors, &ProblemField{Location: "body.runtime_user_id", Message: "only a workspace admin's key sets the user a tool runs as"})
			return p
		}
		if t.RuntimeUserID != "" {
			if _, err := ent.Member(ctx, ws, t.RuntimeUserID); errors.Is(err, store.ErrNotFound) {
				return fieldError(http.StatusBadRequest, "body.runtime_user_id", "user "+t.RuntimeUserID+" is not a member of this workspace")
			} else if err != nil {
				return apiError(err, "member "+t.RuntimeUserID)
			}
		}
	}
	if err := checkContract(t, inDoc, outDoc); err != nil {
		return err
	}
	// The store's own rules, on the tool as it will be stored (its schemas are written after
	// this check, so placeholders stand for their ids).
	c := t.Clone()
	c.InputSchemaID, c.OutputSchemaID = cmp.Or(c.InputSchemaID, "sch_new"), cmp.Or(c.OutputSchemaID, "sch_new")
	if err := c.Check(); err != nil {
		return problemf(http.StatusBadRequest, CodeInvalidRequest, err.Error())
	}
	return nil
}

// checkContract builds the tool the way the server will serve it (loadStoredTools): its
// schema documents, description and examples must make a tool, or it would be stored and
// never served. Each refusal names its field.
func checkContract(t *store.Tool, inDoc, outDoc []byte) error {
	doc, err := inputDoc("body.input_schema", inDoc)
	if err != nil {
		return err
	}
	out, err := outputDoc("body.output_schema", outDoc)
	if err != nil {
		return err
	}
	target := quiver.TargetServer
	if t.Target == store.TargetClient {
		target = quiver.TargetClient
	}
	// The description is checked last: a placeholder lets the schemas be checked first.
	desc := cmp.Or(t.Description, doc.Description)
	spec := quiver.Spec{Name: t.Name, Description: cmp.Or(desc, "-"), Target: target, InputSchema: doc.Input, Variables: doc.Variables}
	if _, err := quiver.NewTool(spec, nil); err != nil {
		return fieldError(http.StatusBadRequest, "body.input_schema", err.Error())
	}
	spec.OutputSchema = out
	if _, err := quiver.NewTool(spec, nil); err != nil {
		return fieldError(http.StatusBadRequest, "body.output_schema", err.Error())
	}
	for _, e := range t.Examples {
		spec.Examples = append(spec.Examples, quiver.Example{Args: e.Args, Result: e.Result})
	}
	if _, err := quiver.NewTool(spec, nil); err != nil {
		return fieldError(http.StatusBadRequest, "body.examples", err.Error())
	}
	if desc == "" {
		return fieldError(http.StatusBadRequest, "body.description", "a tool needs a description (or its input schema one): it tells the model when to use the tool")
	}
	return nil
}

// inputDoc reads an input schema document: a JSON Schema object, with the tool's variables
// beside the arguments' schema (see jsfunc.SchemaDoc).
func inputDoc(loc string, doc []byte) (*jsfunc.SchemaDoc, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(doc, &m); err != nil || m == nil {
		return nil, fieldError(http.StatusBadRequest, loc, "want a JSON Schema object, like {\"type\": \"object\", \"properties\": {...}}")
	}
	d, err := jsfunc.ParseSchemaDoc(doc)
	if err != nil {
		return nil, fieldError(http.StatusBadRequest, loc, err.Error())
	}
	return d, nil
}

// outputDoc reads an output schema document: a JSON Schema object, or true (or {}) for any
// result, which is no schema.
func outputDoc(loc string, doc []byte) (*schema.Schema, error) {
	switch strings.TrimSpace(string(doc)) {
	case "true", "{}":
		return nil, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(doc, &m); err != nil || m == nil {
		return nil, fieldError(http.StatusBadRequest, loc, "want a JSON Schema object, or true for any result")
	}
	var sc schema.Schema
	if err := json.Unmarshal(doc, &sc); err != nil {
		return nil, fieldError(http.StatusBadRequest, loc, err.Error())
	}
	return &sc, nil
}

// storedSchema is the content of a schema a tool refers to.
func storedSchema(ctx context.Context, ent store.Entities, ws, id string) ([]byte, error) {
	sc, err := ent.Schema(ctx, ws, id)
	if err != nil {
		return nil, apiError(err, "schema "+id)
	}
	return sc.Content, nil
}

// newSchema stores a schema document in the workspace and returns its id.
func (s *Server) newSchema(ctx context.Context, ent store.Entities, ws string, doc json.RawMessage) (string, error) {
	sc := &store.Schema{WorkspaceID: ws, Content: doc}
	if err := ent.CreateSchema(ctx, sc); err != nil {
		return "", apiError(err, "a schema")
	}
	return sc.ID, nil
}

// ---- functions and versions (E2)

type functionOutput struct {
	Body *store.Function
}

type functionsOutput struct {
	Body struct {
		Functions []*store.Function `json:"functions" doc:"Oldest first."`
	}
}

type functionInput struct {
	ID string `path:"id" maxLength:"64" doc:"The function's id (fun_...)."`
}

type createFunctionInput struct {
	Body struct {
		Name string `json:"name" minLength:"1" maxLength:"128" doc:"Unique among the workspace's functions; no spaces."`
	}
}

type createVersionInput struct {
	ID   string `path:"id" maxLength:"64" doc:"The function's id (fun_...)."`
	Body struct {
		Code         string          `json:"code" minLength:"1" maxLength:"524288" doc:"The JavaScript module: its default export receives the arguments and a state object and returns the result."`
		InputSchema  json.RawMessage `json:"input_schema,omitempty" doc:"The JSON Schema (an object) of the arguments the code expects, with the variables it reads."`
		OutputSchema json.RawMessage `json:"output_schema,omitempty" doc:"The JSON Schema (an object) of what the code returns."`
	}
}

type versionOutput struct {
	Body *store.FunctionVersion
}

type versionsOutput struct {
	Body struct {
		Versions []*store.FunctionVersion `json:"versions" doc:"In order, version 1 first."`
	}
}

type defaultVersionInput struct {
	ID   string `path:"id" maxLength:"64" doc:"The function's id (fun_...)."`
	Body struct {
		VersionID string `json:"version_id" minLength:"1" maxLength:"64" doc:"A version of the function (fnv_...): the tools that pin none run it."`
	}
}

func (s *Server) registerFunctions(api huma.API) {
	register(api, huma.Operation{OperationID: "list-functions", Method: http.MethodGet, Path: "/v1/functions",
		Summary: "The workspace's functions, oldest first"}, func(ctx context.Context, _ *struct{}) (*functionsOutput, error) {
		ent, err := s.entities()
		if err != nil {
			return nil, err
		}
		fs, err := ent.Functions(ctx, s.workspaceID(ctx))
		if err != nil {
			return nil, apiError(err, "the functions")
		}
		out := &functionsOutput{}
		out.Body.Functions = nonNil(fs)
		return out, nil
	})

	register(api, huma.Operation{OperationID: "create-function", Method: http.MethodPost, Path: "/v1/functions",
		Summary: "Create a function, without versions yet", DefaultStatus: http.StatusCreated},
		func(ctx context.Context, in *createFunctionInput) (*functionOutput, error) {
			if _, err := s.member(ctx, "read functions but not create them"); err != nil {
				return nil, err
			}
			ent, err := s.entities()
			if err != nil {
				return nil, err
			}
			f := &store.Function{WorkspaceID: s.workspaceID(ctx), Name: in.Body.Name}
			if err := f.Check(); err != nil {
				return nil, fieldError(http.StatusBadRequest, "body.name", err.Error())
			}
			if err := ent.CreateFunction(ctx, f); err != nil {
				return nil, storeFieldError(err, "function "+f.Name, "body.name")
			}
			return &functionOutput{Body: f}, nil
		})

	register(api, huma.Operation{OperationID: "get-function", Method: http.MethodGet, Path: "/v1/functions/{id}",
		Summary: "A function of the workspace, or a system function"}, func(ctx context.Context, in *functionInput) (*functionOutput, error) {
		if err := checkID("path.id", store.PrefixFunction, in.ID); err != nil {
			return nil, err
		}
		ent, err := s.entities()
		if err != nil {
			return nil, err
		}
		f, err := ent.Function(ctx, s.workspaceID(ctx), in.ID)
		if err != nil {
			return nil, apiError(err, "function "+in.ID)
		}
		return &functionOutput{Body: f}, nil
	})

	register(api, huma.Operation{OperationID: "create-function-version", Method: http.MethodPost, Path: "/v1/functions/{id}/versions",
		Summary: "Add a version of a function's code; the first becomes its default", DefaultStatus: http.StatusCreated},
		func(ctx context.Context, in *createVersionInput) (*versionOutput, error) {
			if _, err := s.member(ctx, "read functions but not change them"); err != nil {
				return nil, err
			}
			ent, f, err := s.ownFunction(ctx, in.ID)
			if err != nil {
				return nil, err
			}
			b := &in.Body
			if err := checkVersion(f.Name, b.Code, b.InputSchema, b.OutputSchema); err != nil {
				return nil, err
			}
			ws := s.workspaceID(ctx)
			v := &store.FunctionVersion{WorkspaceID: ws, FunctionID: f.ID, Code: b.Code}
			if b.InputSchema != nil {
				if v.InputSchemaID, err = s.newSchema(ctx, ent, ws, b.InputSchema); err != nil {
					return nil, err
				}
			}
			if b.OutputSchema != nil {
				if v.OutputSchemaID, err = s.newSchema(ctx, ent, ws, b.OutputSchema); err != nil {
					return nil, err
				}
			}
			if err := ent.CreateFunctionVersion(ctx, v); err != nil {
				return nil, apiError(err, "a version of function "+f.ID)
			}
			s.toolsChanged(ctx, ws) // the first version is the default, which tools then run
			return &versionOutput{Body: v}, nil
		})

	register(api, huma.Operation{OperationID: "list-function-versions", Method: http.MethodGet, Path: "/v1/functions/{id}/versions",
		Summary: "A function's versions, in order"}, func(ctx context.Context, in *functionInput) (*versionsOutput, error) {
		if err := checkID("path.id", store.PrefixFunction, in.ID); err != nil {
			return nil, err
		}
		ent, err := s.entities()
		if err != nil {
			return nil, err
		}
		vs, err := ent.FunctionVersions(ctx, s.workspaceID(ctx), in.ID)
		if err != nil {
			return nil, apiError(err, "function "+in.ID)
		}
		out := &versionsOutput{}
		out.Body.Versions = nonNil(vs)
		return out, nil
	})

	register(api, huma.Operation{OperationID: "set-default-version", Method: http.MethodPut, Path: "/v1/functions/{id}/default-version",
		Summary: "Make a version the function's default: the tools that pin no version run it"},
		func(ctx context.Context, in *defaultVersionInput) (*functionOutput, error) {
			if _, err := s.member(ctx, "read functions but not change them"); err != nil {
				return nil, err
			}
			if err := checkID("body.version_id", store.PrefixFunctionVersion, in.Body.VersionID); err != nil {
				return nil, err
			}
			ent, _, err := s.ownFunction(ctx, in.ID)
			if err != nil {
				return nil, err
			}
			ws := s.workspaceID(ctx)
			f, err := ent.SetDefaultVersion(ctx, ws, in.ID, in.Body.VersionID)
			if err != nil {
				return nil, storeFieldError(err, "version "+in.Body.VersionID+" of function "+in.ID, "body.version_id")
			}
			s.toolsChanged(ctx, ws)
			return &functionOutput{Body: f}, nil
		})
}

// ownFunction is a function of the workspace that a request may change: another
// workspace's is 404, a system function 403.
func (s *Server) ownFunction(ctx context.Context, id string) (store.Entities, *store.Function, error) {
	if err := checkID("path.id", store.PrefixFunction, id); err != nil {
		return nil, nil, err
	}
	ent, err := s.entities()
	if err != nil {
		return nil, nil, err
	}
	f, err := ent.Function(ctx, s.workspaceID(ctx), id)
	if err != nil {
		return nil, nil, apiError(err, "function "+id)
	}
	if f.WorkspaceID != s.workspaceID(ctx) {
		return nil, nil, problemf(http.StatusForbidden, CodeForbidden, "function "+id+" is a system function: it cannot be changed")
	}
	return ent, f, nil
}

// checkVersion checks a version before it is stored: the code must parse (the interpreter's
// message names the place), and the schemas be ones a tool can have.
func checkVersion(name, code string, inDoc, outDoc []byte) error {
	// The description is the tool's business; a function's check only needs one to pass.
	if _, err := jsfunc.New(jsfunc.Definition{Name: name, Description: "function " + name, Code: code}); err != nil {
		return fieldError(http.StatusBadRequest, "body.code", strings.TrimPrefix(err.Error(), "jsfunc: "))
	}
	spec := quiver.Spec{Name: name, Description: "function " + name}
	if inDoc != nil {
		doc, err := inputDoc("body.input_schema", inDoc)
		if err != nil {
			return err
		}
		spec.InputSchema, spec.Variables = doc.Input, doc.Variables
		if _, err := quiver.NewTool(spec, nil); err != nil {
			return fieldError(http.StatusBadRequest, "body.input_schema", err.Error())
		}
	}
	if outDoc != nil {
		out, err := outputDoc("body.output_schema", outDoc)
		if err != nil {
			return err
		}
		spec.OutputSchema = out
		if _, err := quiver.NewTool(spec, nil); err != nil {
			return fieldError(http.StatusBadRequest, "body.output_schema", err.Error())
		}
	}
	return nil
}
