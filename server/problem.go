package server

import (
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strings"

	"github.com/danielgtaylor/huma/v2"

	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/store"
)

// ProblemDetails is every error answer of the API: RFC 9457 problem details (application/problem+json)
// with a stable Code a program can switch on, and, for a request that breaks the API's rules,
// the fields at fault and what they allow.
type ProblemDetails struct {
	Type   string `json:"type,omitempty" doc:"A URI reference naming the problem's type: about:blank."`
	Title  string `json:"title,omitempty" doc:"The HTTP status's words."`
	Status int    `json:"status,omitempty" doc:"The HTTP status code."`
	Detail string `json:"detail,omitempty" doc:"What went wrong this time, in words."`
	// Code is stable: clients switch on it, and the words in Detail may change.
	Code   string          `json:"code" enum:"invalid_request,unauthorized,forbidden,not_found,conflict,too_large,missing_variables,not_pending,run_queued,too_many_streams,unavailable,internal" doc:"What went wrong, for programs: stable across versions."`
	Errors []*ProblemField `json:"errors,omitempty" doc:"The fields at fault, when the request broke the API's rules."`
}

// ProblemField is one field at fault in a request.
type ProblemField struct {
	// Location is where the field is: body.name, query.limit, path.id...
	Location string `json:"location,omitempty" doc:"Where the field is: body.name, query.limit, path.id."`
	Message  string `json:"message,omitempty" doc:"What is wrong with it, and what is allowed."`
	Value    any    `json:"value,omitempty" doc:"The value given, when it is short enough to show."`
}

// Stable problem codes.
const (
	CodeInvalidRequest   = "invalid_request"
	CodeUnauthorized     = "unauthorized"
	CodeForbidden        = "forbidden"
	CodeNotFound         = "not_found"
	CodeConflict         = "conflict"
	CodeTooLarge         = "too_large"
	CodeMissingVariables = "missing_variables"
	CodeNotPending       = "not_pending"
	CodeRunQueued        = "run_queued"
	CodeTooManyStreams   = "too_many_streams"
	CodeUnavailable      = "unavailable"
	CodeInternal         = "internal"
)

func (p *ProblemDetails) Error() string  { return p.Detail }
func (p *ProblemDetails) GetStatus() int { return p.Status }

// ContentType makes the answer application/problem+json, as RFC 9457 names it.
func (p *ProblemDetails) ContentType(ct string) string {
	if ct == "application/json" {
		return "application/problem+json"
	}
	return ct
}

// problemf is an error answer with a code of its own; fields name the fields at fault.
func problemf(status int, code, detail string, fields ...*ProblemField) *ProblemDetails {
	return &ProblemDetails{Type: "about:blank", Title: http.StatusText(status), Status: status, Detail: detail, Code: code, Errors: fields}
}

// codeOf is the code of an answer huma makes by itself (a body that does not parse or
// validate, a body over the cap) or of one of the huma.ErrorNNN helpers.
func codeOf(status int) string {
	switch status {
	case http.StatusBadRequest, http.StatusUnprocessableEntity, http.StatusUnsupportedMediaType:
		return CodeInvalidRequest
	case http.StatusUnauthorized:
		return CodeUnauthorized
	case http.StatusForbidden:
		return CodeForbidden
	case http.StatusNotFound:
		return CodeNotFound
	case http.StatusConflict:
		return CodeConflict
	case http.StatusRequestEntityTooLarge:
		return CodeTooLarge
	case http.StatusServiceUnavailable:
		return CodeUnavailable
	}
	return CodeInternal
}

// newProblem replaces huma's error model with ProblemDetails, so that the answers huma writes by
// itself (validation, size, parse errors) have a code and the document describes one shape.
// huma takes this as a package variable; the server is the only user of huma in Quiver.
func newProblem(status int, msg string, errs ...error) huma.StatusError {
	p := problemf(status, codeOf(status), msg)
	if status == 0 { // huma asks for an instance to describe the error type
		p.Title, p.Type = "", ""
	}
	for _, err := range errs {
		var d huma.ErrorDetailer
		switch {
		case err == nil:
			continue
		case errors.As(err, &d):
			ed := d.ErrorDetail()
			f := &ProblemField{Location: missingField(ed.Location, ed.Message), Message: ed.Message}
			if !strings.HasPrefix(ed.Location, "body") {
				// A body may carry a secret (a variable's value, a tool's arguments): what
				// it held is never repeated; a query's or a path's value is.
				f.Value = shortValue(ed.Value)
			}
			p.Errors = append(p.Errors, f)
		default:
			p.Errors = append(p.Errors, &ProblemField{Message: err.Error()})
		}
	}
	return p
}

// missingField names the missing field in the location of a "required property" error, which
// huma places at the object holding it (body, body.items[0]): the field at fault is the one
// missing.
func missingField(location, msg string) string {
	const pre, post = "expected required property ", " to be present"
	if name, ok := strings.CutPrefix(msg, pre); ok {
		if name, ok = strings.CutSuffix(name, post); ok && name != "" {
			return location + "." + name
		}
	}
	return location
}

// shortValue keeps a value given in a request out of the answer when it is long: an answer
// must not echo a megabyte back.
func shortValue(v any) any {
	if s, ok := v.(string); ok && len(s) > 200 {
		return nil
	}
	switch v.(type) {
	case map[string]any, []any:
		return nil
	}
	return v
}

func init() {
	huma.NewError = newProblem
}

// apiError maps a store error to the API's answer: not found (another workspace's record
// included: 404, never 403, so that nothing says it exists), invalid input, a conflict, a
// forbidden change, or a failure of the server's own (whose cause is logged, not told).
// what names the record ("thread thr_...").
func apiError(err error, what string) error {
	var p *ProblemDetails
	switch {
	case errors.As(err, &p):
		return p
	case errors.Is(err, store.ErrNotFound):
		return problemf(http.StatusNotFound, CodeNotFound, "no "+what+" in this workspace")
	case errors.Is(err, store.ErrInvalid):
		return problemf(http.StatusBadRequest, CodeInvalidRequest, what+": "+err.Error())
	case errors.Is(err, store.ErrConflict), errors.Is(err, store.ErrExists):
		return problemf(http.StatusConflict, CodeConflict, what+": "+err.Error())
	case errors.Is(err, store.ErrForbidden):
		return problemf(http.StatusForbidden, CodeForbidden, what+": "+err.Error())
	}
	slog.Error("server: an API request failed", "what", what, "err", err)
	return problemf(http.StatusInternalServerError, CodeInternal, "the server failed on "+what+"; its log says why")
}

// problem is the API's answer to an operation's refusal (a *platform.Error), naming the field
// at fault where the request holds it: in ("body" or "query") for the operation's inputs,
// path.NAME for those in its path (id, and the names given). It maps each kind of refusal to
// its status here, once.
func problem(err error, in string, pathParams ...string) error {
	var e *platform.Error
	if !errors.As(err, &e) {
		return apiError(err, "the request")
	}
	status, code := http.StatusBadRequest, CodeInvalidRequest
	switch e.Kind {
	case platform.Invalid:
	case platform.MissingVariables:
		code = CodeMissingVariables
	case platform.NotFound:
		status, code = http.StatusNotFound, CodeNotFound
	case platform.Forbidden:
		status, code = http.StatusForbidden, CodeForbidden
	case platform.Conflict:
		status, code = http.StatusConflict, CodeConflict
	case platform.NotPending:
		status, code = http.StatusConflict, CodeNotPending
	case platform.RunQueued:
		status, code = http.StatusConflict, CodeRunQueued
	case platform.Unavailable:
		status, code = http.StatusServiceUnavailable, CodeUnavailable
	default:
		return apiError(e.Cause, e.Message) // logged; the answer says only that it failed
	}
	where := func(field string) string {
		name, _, _ := strings.Cut(field, ".")
		name, _, _ = strings.Cut(name, "[")
		if name == "id" || slices.Contains(pathParams, name) {
			return "path." + field
		}
		return in + "." + field
	}
	if len(e.Fields) > 0 {
		fields := make([]*ProblemField, len(e.Fields))
		msgs := make([]string, len(e.Fields))
		for i, f := range e.Fields {
			fields[i] = &ProblemField{Location: where(f.Field), Message: f.Message}
			msgs[i] = fields[i].Location + ": " + f.Message
		}
		return problemf(status, code, e.Detail+": "+strings.Join(msgs, "; "), fields...)
	}
	if e.Field == "" {
		return problemf(status, code, e.Error())
	}
	loc := where(e.Field)
	detail := e.Detail
	if detail == "" {
		detail = loc + ": " + e.Message
	}
	return problemf(status, code, detail, &ProblemField{Location: loc, Message: e.Message})
}

// LimitProblem is the answer to a call a limit refused (429, with Retry-After): a problem
// whose code is the call's result's, rate_limited or quota_exhausted. A type of its own, so that
// the codes of every other answer (ProblemDetails.Code) stay the set a client was written for.
type LimitProblem struct {
	Type   string `json:"type,omitempty" doc:"A URI reference naming the problem's type: about:blank."`
	Title  string `json:"title,omitempty" doc:"The HTTP status's words."`
	Status int    `json:"status,omitempty" doc:"The HTTP status code: 429."`
	Detail string `json:"detail,omitempty" doc:"The limit reached and when to try again, in words."`
	Code   string `json:"code" enum:"rate_limited,quota_exhausted" doc:"rate_limited: a limit on how often (per second, minute or hour, or at once); quota_exhausted: a daily quota. The Retry-After header says when to try again."`
}

// AuthorizationProblem is the answer to a call of a tool that acts as the caller at a provider
// they have not connected (403): where to connect, and the provider.
type AuthorizationProblem struct {
	Type             string   `json:"type,omitempty" doc:"A URI reference naming the problem's type: about:blank."`
	Title            string   `json:"title,omitempty" doc:"The HTTP status's words."`
	Status           int      `json:"status,omitempty" doc:"The HTTP status code: 403."`
	Detail           string   `json:"detail,omitempty" doc:"What the call needs, in words."`
	Code             string   `json:"code" enum:"authorization_required" doc:"authorization_required: connect the provider, then call again."`
	Provider         string   `json:"provider" doc:"The provider to connect."`
	AuthorizationURL string   `json:"authorization_url,omitempty" doc:"Where the person connects it: the console's connections page."`
	Scopes           []string `json:"scopes,omitempty" doc:"The scopes the call needs."`
}

func (p *AuthorizationProblem) Error() string  { return p.Detail }
func (p *AuthorizationProblem) GetStatus() int { return p.Status }

// ContentType makes the answer application/problem+json, as RFC 9457 names it.
func (p *AuthorizationProblem) ContentType(ct string) string {
	if ct == "application/json" {
		return "application/problem+json"
	}
	return ct
}

// Limit problem codes.
const (
	CodeRateLimited    = "rate_limited"
	CodeQuotaExhausted = "quota_exhausted"
)

func (p *LimitProblem) Error() string  { return p.Detail }
func (p *LimitProblem) GetStatus() int { return p.Status }

// ContentType makes the answer application/problem+json, as RFC 9457 names it.
func (p *LimitProblem) ContentType(ct string) string {
	if ct == "application/json" {
		return "application/problem+json"
	}
	return ct
}
