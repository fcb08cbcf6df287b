package mcp

import (
	"context"
	"errors"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// CodeResourceNotFoundLegacy is the code of a resource not found in the specification of every
// MCP protocol version up to 2025-11-25 (its server/resources page, "Error Handling"). From
// 2026-07-28 on it is invalid params (-32602), and clients still accept -32002 from older
// servers.
const CodeResourceNotFoundLegacy = -32002

// ResourceNotFoundCode is the code a resources/read of a resource that does not exist is
// answered with in a session of protocol version: -32002 up to 2025-11-25, -32602 (invalid
// params) from 2026-07-28 on. A version Quiver does not know ("" included) is taken as a
// session's, which 2025-11-25 and earlier are.
func ResourceNotFoundCode(version string) int64 {
	if version >= protocolVersionSessionless {
		return jsonrpc.CodeInvalidParams
	}
	return CodeResourceNotFoundLegacy
}

// specErrors answers what the specification of each protocol version says a request is
// answered with where the SDK or the dispatcher would say something else: a tools/call without
// a tool's name is invalid params (the dispatcher would look the empty name up, and its record
// be refused), and a resource not found has the code of the request's version (the go-sdk
// answers -32602 at every version, its reading of 2026-07-28; the versions before that say
// -32002). It is the outermost of the server's middleware.
func specErrors(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		switch method {
		case "tools/call":
			if r, ok := req.(*sdk.CallToolRequest); ok && (r.Params == nil || r.Params.Name == "") {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "tools/call needs the name of the tool to call (params.name)"}
			}
		case "resources/read":
			res, err := next(ctx, method, req)
			if err != nil {
				err = resourceErrorOfVersion(req, err)
			}
			return res, err
		}
		return next(ctx, method, req)
	}
}

// resourceErrorOfVersion returns err, the answer to a resources/read, with the code of the
// request's protocol version when it says the resource was not found (as
// [sdk.ResourceNotFoundError] words it: the SDK's own answer to a URI no resource serves, and
// what Quiver's handlers return); any other error as it is.
func resourceErrorOfVersion(req sdk.Request, err error) error {
	r, ok := req.(*sdk.ReadResourceRequest)
	var got *jsonrpc.Error
	if !ok || r.Params == nil || !errors.As(err, &got) {
		return err
	}
	var want *jsonrpc.Error
	if !errors.As(sdk.ResourceNotFoundError(r.Params.URI), &want) || got.Code != want.Code || got.Message != want.Message {
		return err
	}
	return &jsonrpc.Error{Code: ResourceNotFoundCode(r.ProtocolVersion()), Message: got.Message, Data: got.Data}
}
