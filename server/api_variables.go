package server

import (
	"context"
	"net/http"
	"reflect"

	"github.com/danielgtaylor/huma/v2"

	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/store"
)

// ---- the variables of an agent and of a user

// An agent's variables (layer agent, owned by the agent's name) are read by any key of the
// workspace and set by members; a user's (layer user) only by the user's own keys, or an
// admin's. A secret is sealed as a thread's is and never shown again.

type agentVariablesInput struct {
	Agent string `path:"agent" minLength:"1" maxLength:"128" doc:"The agent's name, as this server runs it."`
}

type agentVariableInput struct {
	Agent string `path:"agent" minLength:"1" maxLength:"128" doc:"The agent's name, as this server runs it."`
	Name  string `path:"name" minLength:"1" maxLength:"128" pattern:"^[A-Za-z0-9_][A-Za-z0-9_.-]*$" patternDescription:"letters, digits, _, . and -, not starting with . or -" doc:"The variable's name: 1 to 128 letters (A-Z, a-z), digits, _, . and -, not starting with . or -."`
}

type setAgentVariableInput struct {
	Agent string `path:"agent" minLength:"1" maxLength:"128" doc:"The agent's name, as this server runs it."`
	Name  string `path:"name" minLength:"1" maxLength:"128" pattern:"^[A-Za-z0-9_][A-Za-z0-9_.-]*$" patternDescription:"letters, digits, _, . and -, not starting with . or -" doc:"The variable's name: 1 to 128 letters (A-Z, a-z), digits, _, . and -, not starting with . or -."`
	// RawBody (a VariableBody) is read by parseVariableBody: no problem shows a value given.
	RawBody []byte
}

type userVariablesInput struct {
	ID string `path:"id" maxLength:"64" doc:"The user's id (usr_...): a member of the workspace."`
}

type userVariableInput struct {
	ID   string `path:"id" maxLength:"64" doc:"The user's id (usr_...): a member of the workspace."`
	Name string `path:"name" minLength:"1" maxLength:"128" pattern:"^[A-Za-z0-9_][A-Za-z0-9_.-]*$" patternDescription:"letters, digits, _, . and -, not starting with . or -" doc:"The variable's name: 1 to 128 letters (A-Z, a-z), digits, _, . and -, not starting with . or -."`
}

type setUserVariableInput struct {
	ID   string `path:"id" maxLength:"64" doc:"The user's id (usr_...): a member of the workspace."`
	Name string `path:"name" minLength:"1" maxLength:"128" pattern:"^[A-Za-z0-9_][A-Za-z0-9_.-]*$" patternDescription:"letters, digits, _, . and -, not starting with . or -" doc:"The variable's name: 1 to 128 letters (A-Z, a-z), digits, _, . and -, not starting with . or -."`
	// RawBody (a VariableBody) is read by parseVariableBody: no problem shows a value given.
	RawBody []byte
}

func (s *Server) registerLayerVariables(api huma.API) {
	const agentOne, userOne = "/v1/agents/{agent}/variables/{name}", "/v1/users/{id}/variables/{name}"
	agentOf := func(name string) platform.Owner { return platform.Owner{Layer: store.LayerAgent, ID: name} }
	userOf := func(id string) platform.Owner { return platform.Owner{Layer: store.LayerUser, ID: id} }
	register(api, huma.Operation{OperationID: "list-agent-variables", Method: http.MethodGet, Path: "/v1/agents/{agent}/variables",
		Summary: "The variables set on an agent in the workspace, secrets without their value"},
		func(ctx context.Context, in *agentVariablesInput) (*threadVariablesOutput, error) {
			return s.listVariables(ctx, agentOf(in.Agent))
		})
	register(api, huma.Operation{OperationID: "set-agent-variable", Method: http.MethodPut, Path: agentOne,
		Summary: "Set a variable on an agent in the workspace; a secret is encrypted at rest"},
		func(ctx context.Context, in *setAgentVariableInput) (*threadVariableOutput, error) {
			return s.setVariable(ctx, agentOf(in.Agent), in.Name, in.RawBody)
		})
	register(api, huma.Operation{OperationID: "delete-agent-variable", Method: http.MethodDelete, Path: agentOne,
		Summary: "Remove a variable's value from an agent in the workspace", DefaultStatus: http.StatusNoContent},
		func(ctx context.Context, in *agentVariableInput) (*struct{}, error) {
			return nil, s.deleteVariable(ctx, agentOf(in.Agent), in.Name)
		})
	register(api, huma.Operation{OperationID: "list-user-variables", Method: http.MethodGet, Path: "/v1/users/{id}/variables",
		Summary: "The variables set on a member of the workspace, secrets without their value: the key's own user's, or any member's for an admin"},
		func(ctx context.Context, in *userVariablesInput) (*threadVariablesOutput, error) {
			return s.listVariables(ctx, userOf(in.ID))
		})
	register(api, huma.Operation{OperationID: "set-user-variable", Method: http.MethodPut, Path: userOne,
		Summary: "Set a variable on a member of the workspace (the key's own user, or any member for an admin); a secret is encrypted at rest"},
		func(ctx context.Context, in *setUserVariableInput) (*threadVariableOutput, error) {
			return s.setVariable(ctx, userOf(in.ID), in.Name, in.RawBody)
		})
	register(api, huma.Operation{OperationID: "delete-user-variable", Method: http.MethodDelete, Path: userOne,
		Summary: "Remove a variable's value from a member of the workspace (the key's own user, or any member for an admin)", DefaultStatus: http.StatusNoContent},
		func(ctx context.Context, in *userVariableInput) (*struct{}, error) {
			return nil, s.deleteVariable(ctx, userOf(in.ID), in.Name)
		})

	// The bodies are read by the handlers (RawBody); the document describes what they read.
	if doc := api.OpenAPI(); doc != nil {
		for _, p := range []string{agentOne, userOne} {
			if doc.Paths[p] != nil && doc.Paths[p].Put != nil {
				doc.Paths[p].Put.RequestBody = &huma.RequestBody{Required: true, Content: map[string]*huma.MediaType{
					"application/json": {Schema: huma.SchemaFromType(doc.Components.Schemas, reflect.TypeFor[VariableBody]())}}}
			}
		}
	}
}
