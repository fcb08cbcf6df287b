package a2av1

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net/http"
)

// The error codes of A2A 1.0's JSON-RPC binding: JSON-RPC's own, then A2A's.
const (
	CodeParseError                  = -32700
	CodeInvalidRequest              = -32600
	CodeMethodNotFound              = -32601
	CodeInvalidParams               = -32602
	CodeInternalError               = -32603
	CodeTaskNotFound                = -32001
	CodeTaskNotCancelable           = -32002
	CodePushNotificationUnsupported = -32003
	CodeUnsupportedOperation        = -32004
	CodeContentTypeNotSupported     = -32005
	CodeInvalidAgentResponse        = -32006
	CodeExtendedCardNotConfigured   = -32007
	CodeExtensionSupportRequired    = -32008
	CodeVersionNotSupported         = -32009
)

// Error is a JSON-RPC error object, and the error a Handler returns to answer with one.
type Error struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *Error) Error() string { return fmt.Sprintf("%s (A2A error %d)", e.Message, e.Code) }

// Errorf is an *Error of code with a message.
func Errorf(code int, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Request is a JSON-RPC request.
type Request struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params,omitempty"`
}

// Response is a JSON-RPC response: a result or an error.
type Response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *Error          `json:"error,omitempty"`
}

// ParseRequest reads a JSON-RPC request; a body that is not one is an *Error to answer with.
func ParseRequest(body []byte) (*Request, error) {
	var req Request
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, Errorf(CodeParseError, "the body is not a JSON-RPC request object: %v", err)
	}
	switch {
	case req.JSONRPC != "2.0":
		return &req, Errorf(CodeInvalidRequest, `jsonrpc must be "2.0", not %q`, req.JSONRPC)
	case req.Method == "":
		return &req, Errorf(CodeInvalidRequest, "the request has no method")
	case len(req.ID) > 0 && !validID(req.ID):
		return &req, Errorf(CodeInvalidRequest, "the id must be a string, a number or null")
	}
	return &req, nil
}

func validID(id json.RawMessage) bool {
	var v any
	if json.Unmarshal(id, &v) != nil {
		return false
	}
	switch v.(type) {
	case string, float64, nil:
		return true
	}
	return false
}

// Handler answers the methods of A2A 1.0 that Quiver serves. An error that is an *Error is
// answered as it is; any other is an internal error, its words kept from the client.
type Handler interface {
	SendMessage(ctx context.Context, req *SendMessageRequest) (*SendMessageResponse, error)
	SendStreamingMessage(ctx context.Context, req *SendMessageRequest) iter.Seq2[*StreamResponse, error]
	GetTask(ctx context.Context, req *GetTaskRequest) (*Task, error)
	CancelTask(ctx context.Context, req *CancelTaskRequest) (*Task, error)
	SubscribeToTask(ctx context.Context, req *SubscribeToTaskRequest) iter.Seq2[*StreamResponse, error]
}

// Serve answers req, a request of A2A 1.0, with h: a JSON answer, or an event stream for the
// streaming methods. The methods h has not are answered with the error 1.0 gives them.
func Serve(w http.ResponseWriter, r *http.Request, req *Request, h Handler) {
	ctx := r.Context()
	var result any
	var err error
	switch req.Method {
	case MethodSendMessage:
		var p SendMessageRequest
		if err = params(req, &p); err == nil {
			result, err = h.SendMessage(ctx, &p)
		}
	case MethodGetTask:
		var p GetTaskRequest
		if err = params(req, &p); err == nil {
			result, err = h.GetTask(ctx, &p)
		}
	case MethodCancelTask:
		var p CancelTaskRequest
		if err = params(req, &p); err == nil {
			result, err = h.CancelTask(ctx, &p)
		}
	case MethodSendStreamingMessage:
		var p SendMessageRequest
		if err = params(req, &p); err == nil {
			stream(w, req.ID, h.SendStreamingMessage(ctx, &p))
			return
		}
	case MethodSubscribeToTask:
		var p SubscribeToTaskRequest
		if err = params(req, &p); err == nil {
			stream(w, req.ID, h.SubscribeToTask(ctx, &p))
			return
		}
	default:
		err = unsupported(req.Method)
	}
	if err != nil {
		WriteError(w, req.ID, err)
		return
	}
	WriteResult(w, req.ID, result)
}

// unsupported is the error for a method Serve does not answer.
func unsupported(method string) *Error {
	switch method {
	case MethodCreatePushConfig, MethodGetPushConfig, MethodListPushConfigs, MethodDeletePushConfig:
		return Errorf(CodePushNotificationUnsupported, "this agent sends no push notifications")
	case MethodGetExtendedAgentCard:
		return Errorf(CodeExtendedCardNotConfigured, "this agent has no extended card")
	case MethodListTasks:
		return Errorf(CodeUnsupportedOperation, "this agent does not list tasks: get one by its id")
	}
	return Errorf(CodeMethodNotFound, "the method %q is not one of A2A %s's (SendMessage, SendStreamingMessage, GetTask, CancelTask, SubscribeToTask)", method, Version)
}

// params decodes a request's params into p, checking what every method needs.
func params(req *Request, p any) error {
	if len(req.Params) == 0 || bytes.Equal(req.Params, []byte("null")) {
		return Errorf(CodeInvalidParams, "%s needs params", req.Method)
	}
	if err := json.Unmarshal(req.Params, p); err != nil {
		return Errorf(CodeInvalidParams, "the params of %s: %v", req.Method, err)
	}
	switch x := p.(type) {
	case *SendMessageRequest:
		if x.Message == nil || len(x.Message.Parts) == 0 {
			return Errorf(CodeInvalidParams, "%s needs params.message with at least one part", req.Method)
		}
	case *GetTaskRequest:
		return needID(req.Method, x.ID)
	case *CancelTaskRequest:
		return needID(req.Method, x.ID)
	case *SubscribeToTaskRequest:
		return needID(req.Method, x.ID)
	}
	return nil
}

func needID(method, id string) error {
	if id == "" {
		return Errorf(CodeInvalidParams, "%s needs params.id, the task's id", method)
	}
	return nil
}

// WriteResult answers a request with its result.
func WriteResult(w http.ResponseWriter, id json.RawMessage, result any) {
	b, err := json.Marshal(result)
	if err != nil {
		WriteError(w, id, err)
		return
	}
	write(w, &Response{JSONRPC: "2.0", ID: idOrNull(id), Result: b})
}

// WriteError answers a request with err: an *Error as it is, any other as an internal error.
func WriteError(w http.ResponseWriter, id json.RawMessage, err error) {
	write(w, &Response{JSONRPC: "2.0", ID: idOrNull(id), Error: asError(err)})
}

func asError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return Errorf(CodeInternalError, "internal error")
}

func idOrNull(id json.RawMessage) json.RawMessage {
	if len(id) == 0 {
		return json.RawMessage("null")
	}
	return id
}

func write(w http.ResponseWriter, resp *Response) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set(VersionHeader, Version)
	_ = json.NewEncoder(w).Encode(resp)
}

// stream writes events as server-sent events, each a JSON-RPC response of the request's id;
// an error ends the stream as a JSON-RPC error.
func stream(w http.ResponseWriter, id json.RawMessage, events iter.Seq2[*StreamResponse, error]) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set(VersionHeader, Version)
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	send := func(resp *Response) bool {
		b, err := json.Marshal(resp)
		if err != nil {
			return false
		}
		if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
			return false
		}
		if flusher != nil {
			flusher.Flush()
		}
		return true
	}
	for ev, err := range events {
		if err != nil {
			send(&Response{JSONRPC: "2.0", ID: idOrNull(id), Error: asError(err)})
			return
		}
		b, err := json.Marshal(ev)
		if err != nil || !send(&Response{JSONRPC: "2.0", ID: idOrNull(id), Result: b}) {
			return
		}
	}
}
