package server

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/store"
)

// The workspace's OpenAPI documents: each operation of one is a tool of the workspace (see
// platform.ImportOpenAPI, which holds the rules).

// openAPISourceRecord is a stored source as the API answers it; the document itself only
// when one source is asked for.
type openAPISourceRecord struct {
	Name             string            `json:"name" doc:"The tools' prefix: an operation findPets is the tool NAME.findPets."`
	Document         *string           `json:"document,omitempty" doc:"The document as imported (get-openapi-source only)."`
	Servers          []string          `json:"servers" doc:"The base URLs the tools call; empty: the document's."`
	Operations       []string          `json:"operations" doc:"The operations imported (operationId, tag:NAME or METHOD /path); empty: all."`
	Credentials      map[string]string `json:"credentials" doc:"Security scheme to the secret variable holding its credential; a scheme left out reads NAME_SCHEME in capitals."`
	TimeoutMS        int64             `json:"timeout_ms" doc:"A call's timeout; 0: the default (30 s)."`
	MaxResponseBytes int64             `json:"max_response_bytes" doc:"The cap of an answer's body; 0: the default (1 MiB)."`
	MaxOperations    int               `json:"max_operations" doc:"The most operations the document may select; 0: the default (1,000)."`
	Strict           bool              `json:"strict" doc:"Whether an answer that does not match the document's schema of it fails the call (false: passed through with a warning in the result's meta)."`
	CreatedBy        *string           `json:"created_by" nullable:"true"`
	CreatedAt        time.Time         `json:"created_at"`
	UpdatedAt        time.Time         `json:"updated_at"`
}

func openAPISourceRecordOf(s *store.OpenAPISource, withDocument bool) *openAPISourceRecord {
	r := &openAPISourceRecord{Name: s.Name, Servers: s.Servers, Operations: s.Operations, Credentials: s.Credentials,
		TimeoutMS: s.Timeout.Milliseconds(), MaxResponseBytes: s.MaxResponseBytes, MaxOperations: s.MaxOperations, Strict: s.Strict,
		CreatedBy: orNull(s.CreatedBy),
		CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt}
	for _, l := range []*[]string{&r.Servers, &r.Operations} {
		if *l == nil {
			*l = []string{}
		}
	}
	if r.Credentials == nil {
		r.Credentials = map[string]string{}
	}
	if withDocument {
		doc := string(s.Document)
		r.Document = &doc
	}
	return r
}

// openAPIImportBody is a source with what it makes.
type openAPIImportBody struct {
	Source  *openAPISourceRecord `json:"source"`
	Created bool                 `json:"created" doc:"Whether the import made a new source (false: it replaced the one of the same name)."`
	Tools   []string             `json:"tools" doc:"The names of the tools the document makes."`
	Skipped []openAPISkipped     `json:"skipped" doc:"The operations left out, and why."`
}

type openAPISkipped struct {
	Operation string `json:"operation" doc:"METHOD /path"`
	Reason    string `json:"reason"`
}

func openAPIImportBodyOf(im *platform.OpenAPIImport, withDocument bool) *openAPIImportBody {
	b := &openAPIImportBody{Source: openAPISourceRecordOf(im.Source, withDocument), Created: im.Created, Tools: []string{}, Skipped: []openAPISkipped{}}
	for _, t := range im.Tools {
		b.Tools = append(b.Tools, t.Name())
	}
	for _, s := range im.Skipped {
		b.Skipped = append(b.Skipped, openAPISkipped{Operation: s.Operation, Reason: s.Reason})
	}
	return b
}

type importOpenAPIInput struct {
	Body struct {
		Name             string            `json:"name" minLength:"1" maxLength:"32" pattern:"^[A-Za-z0-9_-]+$" doc:"The tools' prefix: an operation findPets becomes NAME.findPets. An import of a name the workspace has replaces it."`
		Document         string            `json:"document" minLength:"1" doc:"The OpenAPI document (3.0 or 3.1), JSON or YAML, as text; at most 4 MiB. It must be self-contained: a $ref to another file or URL is refused."`
		Servers          []string          `json:"servers,omitempty" maxItems:"16" doc:"The base URLs the tools call (default: the document's servers); only these are reached, and only at public addresses unless the operator allows the host."`
		Operations       []string          `json:"operations,omitempty" maxItems:"1000" doc:"The operations to import: operationId, tag:NAME or METHOD /path each (default: all)."`
		Credentials      map[string]string `json:"credentials,omitempty" doc:"Security scheme to the secret variable holding its credential (default: NAME_SCHEME in capitals)."`
		TimeoutMS        int64             `json:"timeout_ms,omitempty" minimum:"0" doc:"A call's timeout in milliseconds (default 30,000; at most 300,000)."`
		MaxResponseBytes int64             `json:"max_response_bytes,omitempty" minimum:"0" doc:"The cap of an answer's body (default 1 MiB; at most 4 MiB)."`
		MaxOperations    int               `json:"max_operations,omitempty" minimum:"0" doc:"The most operations the document may select (default 1,000; at most 10,000): a document or selection of more is refused. Raise it for a large API, or select some operations."`
		Strict           bool              `json:"strict,omitempty" doc:"Make an answer that does not match the document's schema of it a failed call (default false: the answer is passed through with a warning in the result's meta, since the document is at fault)."`
	}
}

type openAPIImportOutput struct {
	Body *openAPIImportBody
}

type openAPISourceInput struct {
	Name string `path:"name" maxLength:"32" doc:"The source's name."`
}

type listOpenAPISourcesOutput struct {
	Body struct {
		Sources []*openAPISourceRecord `json:"sources"`
	}
}

func (s *Server) registerOpenAPISources(api huma.API) {
	register(api, huma.Operation{OperationID: "import-openapi", Method: http.MethodPost, Path: "/v1/openapi-sources",
		Summary: "Import an OpenAPI document (an admin's): each operation becomes a tool of the workspace", DefaultStatus: http.StatusCreated,
		MaxBodyBytes: 2*store.MaxOpenAPIDocumentBytes + 64<<10,
		// A body over the limit holds a document over the platform's cap: refused as the cap
		// refuses it (strictBodies), rather than in huma's words.
		Metadata: map[string]any{bodyTooLarge: &huma.ErrorDetail{Location: "body.document", Message: platform.OpenAPIDocumentTooLarge}}},
		func(ctx context.Context, in *importOpenAPIInput) (*openAPIImportOutput, error) {
			b := &in.Body
			im, err := s.p.ImportOpenAPI(ctx, s.actor(ctx), platform.NewOpenAPISource{Name: b.Name, Document: []byte(b.Document),
				Servers: b.Servers, Operations: b.Operations, Credentials: b.Credentials,
				Timeout: time.Duration(b.TimeoutMS) * time.Millisecond, MaxResponseBytes: b.MaxResponseBytes,
				MaxOperations: b.MaxOperations, Strict: b.Strict})
			if err != nil {
				return nil, problem(err, "body")
			}
			s.toolsChanged(ctx, im.Source.WorkspaceID)
			return &openAPIImportOutput{Body: openAPIImportBodyOf(im, false)}, nil
		})
	register(api, huma.Operation{OperationID: "list-openapi-sources", Method: http.MethodGet, Path: "/v1/openapi-sources",
		Summary: "The workspace's OpenAPI documents, by name"},
		func(ctx context.Context, _ *struct{}) (*listOpenAPISourcesOutput, error) {
			list, err := s.p.OpenAPISources(ctx, s.actor(ctx))
			if err != nil {
				return nil, problem(err, "query")
			}
			out := &listOpenAPISourcesOutput{}
			out.Body.Sources = make([]*openAPISourceRecord, len(list))
			for i, src := range list {
				out.Body.Sources[i] = openAPISourceRecordOf(src, false)
			}
			return out, nil
		})
	register(api, huma.Operation{OperationID: "get-openapi-source", Method: http.MethodGet, Path: "/v1/openapi-sources/{name}",
		Summary: "An OpenAPI document of the workspace, with the tools it makes"},
		func(ctx context.Context, in *openAPISourceInput) (*openAPIImportOutput, error) {
			im, err := s.p.OpenAPISource(ctx, s.actor(ctx), in.Name)
			if err != nil {
				return nil, problem(err, "query", "name")
			}
			return &openAPIImportOutput{Body: openAPIImportBodyOf(im, true)}, nil
		})
	register(api, huma.Operation{OperationID: "delete-openapi-source", Method: http.MethodDelete, Path: "/v1/openapi-sources/{name}",
		Summary: "Remove an OpenAPI document and its tools (an admin's)", DefaultStatus: http.StatusNoContent},
		func(ctx context.Context, in *openAPISourceInput) (*struct{}, error) {
			a := s.actor(ctx)
			if err := s.p.DeleteOpenAPISource(ctx, a, in.Name); err != nil {
				return nil, problem(err, "query", "name")
			}
			s.toolsChanged(ctx, a.WorkspaceID)
			return nil, nil
		})
}
