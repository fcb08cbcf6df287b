package server

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/store"
)

// The entity endpoints of the /v1 API: workspaces, members, API keys, stored tools,
// and functions with their versions. Every read and write names the workspace of the
// request's key, so that a record of another workspace answers 404 like one that does not
// exist. A request is checked in full before anything is written: ids of the wrong kind,
// names, schemas, code and the records it refers to, each refusal naming its field. The rules
// themselves (last admin, runtime users, system tools, free names) are the platform's (and its
// store's): these handlers only translate.

// registerEntities adds the endpoints of workspaces, members, API keys, tools and functions.
// It only describes them: s is used when a request is answered.
func (s *Server) registerEntities(api huma.API) {
	s.registerWorkspaces(api)
	s.registerMembers(api)
	s.registerKeys(api)
	s.registerTools(api)
	s.registerFunctions(api)
	s.registerOpenAPISources(api)
	s.registerGovernance(api)
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

// listed is a list operation's answer: its refusal as a problem naming the query's fields, or
// an output whose list set puts in (never null: [] in JSON).
func listed[T, O any](items []T, err error, set func(*O, []T)) (*O, error) {
	if err != nil {
		return nil, problem(err, "query")
	}
	out := new(O)
	set(out, nonNil(items))
	return out, nil
}

// nonNil makes an empty list [] in JSON, not null.
func nonNil[T any](list []T) []T {
	if list == nil {
		return []T{}
	}
	return list
}

// ---- workspaces

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
			w, k, secret, err := s.p.CreateWorkspace(ctx, s.actor(ctx), in.Body.Name, store.RetentionTier(in.Body.RetentionTier))
			if err != nil {
				return nil, problem(err, "body")
			}
			out := &createWorkspaceOutput{}
			out.Body.Workspace, out.Body.Key, out.Body.Secret = w, k, secret
			return out, nil
		})
	register(api, huma.Operation{OperationID: "get-workspace", Method: http.MethodGet, Path: "/v1/workspaces/{id}",
		Summary: "The key's workspace"}, func(ctx context.Context, in *workspaceInput) (*workspaceOutput, error) {
		w, err := s.p.WorkspaceRecord(ctx, s.actor(ctx), in.ID)
		if err != nil {
			return nil, problem(err, "body")
		}
		return &workspaceOutput{Body: w}, nil
	})
	register(api, huma.Operation{OperationID: "update-workspace", Method: http.MethodPatch, Path: "/v1/workspaces/{id}",
		Summary: "Rename the key's workspace, change its retention tier or its default runtime user"},
		func(ctx context.Context, in *updateWorkspaceInput) (*workspaceOutput, error) {
			b := &in.Body
			c := platform.WorkspaceChange{Name: b.Name, DefaultRuntimeUserID: b.DefaultRuntimeUserID.optional()}
			if b.RetentionTier != nil {
				tier := store.RetentionTier(*b.RetentionTier)
				c.RetentionTier = &tier
			}
			w, err := s.p.UpdateWorkspace(ctx, s.actor(ctx), in.ID, c)
			if err != nil {
				return nil, problem(err, "body")
			}
			return &workspaceOutput{Body: w}, nil
		})
}

// ---- members

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
		ms, err := s.p.Members(ctx, s.actor(ctx))
		if err != nil {
			return nil, problem(err, "query")
		}
		out := &membersOutput{}
		out.Body.Members = make([]*memberRecord, len(ms))
		for i, m := range ms {
			out.Body.Members[i] = memberRecordOf(m)
		}
		return out, nil
	})
	register(api, huma.Operation{OperationID: "add-member", Method: http.MethodPost, Path: "/v1/members",
		Summary: "Add a member by email, making the user when the email is new", DefaultStatus: http.StatusCreated},
		func(ctx context.Context, in *addMemberInput) (*memberOutput, error) {
			m, err := s.p.AddMember(ctx, s.actor(ctx), in.Body.Email, in.Body.Name, store.MemberRole(in.Body.Role))
			return memberAnswer(m, err)
		})
	register(api, huma.Operation{OperationID: "set-member-role", Method: http.MethodPatch, Path: "/v1/members/{user_id}",
		Summary: "Change a member's role; the workspace keeps at least one admin"},
		func(ctx context.Context, in *setRoleInput) (*memberOutput, error) {
			m, err := s.p.SetMemberRole(ctx, s.actor(ctx), in.UserID, store.MemberRole(in.Body.Role))
			return memberAnswer(m, err)
		})
	register(api, huma.Operation{OperationID: "remove-member", Method: http.MethodDelete, Path: "/v1/members/{user_id}",
		Summary:       "Remove a member, but not the last admin; the tools that run as them refuse to run until an admin names another member",
		DefaultStatus: http.StatusNoContent},
		func(ctx context.Context, in *memberPathInput) (*struct{}, error) {
			if err := s.p.RemoveMember(ctx, s.actor(ctx), in.UserID); err != nil {
				return nil, problem(err, "body", "user_id")
			}
			return nil, nil
		})
}

func memberAnswer(m *platform.Member, err error) (*memberOutput, error) {
	if err != nil {
		return nil, problem(err, "body", "user_id")
	}
	return &memberOutput{Body: memberRecordOf(*m)}, nil
}

func memberRecordOf(m platform.Member) *memberRecord {
	return &memberRecord{WorkspaceID: m.WorkspaceID, UserID: m.UserID, Email: m.User.Email, Name: m.User.Name, Role: m.Role, CreatedAt: m.CreatedAt}
}

// ---- API keys

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
		Toolsets  []string   `json:"toolsets,omitempty" doc:"Toolsets of the workspace's entitlements to bind the key to (at most 32 names of 1 to 64 characters of a-z, A-Z, 0-9, _ and -): it may see and call only their tools, at every door. A name the workspace does not define is kept, and reaches no tool until it does. Absent: not bound."`
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
			ks, err := s.p.Keys(ctx, s.actor(ctx))
			return listed(ks, err, func(o *keysOutput, ks []*store.APIKey) { o.Body.Keys = ks })
		})
	register(api, huma.Operation{OperationID: "create-key", Method: http.MethodPost, Path: "/v1/keys",
		Summary: "Make an API key for a member; the key is in the answer, once", DefaultStatus: http.StatusCreated},
		func(ctx context.Context, in *createKeyInput) (*createKeyOutput, error) {
			b := &in.Body
			k, secret, err := s.p.CreateKey(ctx, s.actor(ctx), platform.NewKey{UserID: b.UserID, Role: store.KeyRole(b.Role), Name: b.Name, ExpiresAt: b.ExpiresAt,
				Toolsets: b.Toolsets})
			if err != nil {
				return nil, problem(err, "body")
			}
			out := &createKeyOutput{}
			out.Body.Key, out.Body.Secret = k, secret
			return out, nil
		})
	register(api, huma.Operation{OperationID: "revoke-key", Method: http.MethodDelete, Path: "/v1/keys/{id}",
		Summary: "Revoke an API key for good; servers refuse it within a second"},
		func(ctx context.Context, in *keyInput) (*keyOutput, error) {
			k, err := s.p.RevokeKey(ctx, s.actor(ctx), in.ID)
			if err != nil {
				return nil, problem(err, "body")
			}
			return &keyOutput{Body: k}, nil
		})
}
