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

	"github.com/quiverhq/quiver/platform"
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
// optional is the value as a platform operation takes it.
func (n nullString) optional() platform.Optional[string] {
	return platform.Optional[string]{Set: n.Set, Value: n.Value}
}

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

// checkID refuses an id that is not of the kind the field at loc takes (see platform.CheckID).
func checkID(loc, prefix, id string) error {
	var e *platform.Error
	if errors.As(platform.CheckID("", prefix, id), &e) {
		return fieldError(http.StatusBadRequest, loc, e.Message)
	}
	return nil
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
