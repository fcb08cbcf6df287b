package mcp

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"mime"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// ThreadFileTemplate is the URI template of a thread's files served as MCP resources (see
// [ServerOptions.ThreadFiles]): quiver://threads/thr_.../files/attachments/report.pdf is the
// file /attachments/report.pdf of thread thr_.... The path is a reserved expansion ({+path}),
// so its slashes stay as they are.
const ThreadFileTemplate = "quiver://threads/{id}/files/{+path}"

// threadFilePrefix and threadFileInfix frame a thread file's URI.
const (
	threadFilePrefix = "quiver://threads/"
	threadFileInfix  = "/files/"
)

// DefaultMaxResourceBytes is the default of [ServerOptions.MaxResourceBytes]: the default
// cap of one file of a thread's file system (store.DefaultFileLimits).
const DefaultMaxResourceBytes = 32 << 20

// ErrResourceNotFound is what a [ServerOptions.ThreadFiles] function returns for a file it
// does not serve (a missing thread or file, or one of another workspace): the client is told
// the resource was not found, and nothing else.
var ErrResourceNotFound = errors.New("mcp: resource not found")

// ThreadFilesFunc reads the file at path (absolute, "/attachments/x.png") of a thread, for
// [ServerOptions.ThreadFiles]. It returns the file's content and MIME type; ErrResourceNotFound
// for a file it does not serve; a *jsonrpc.Error to answer with as it is (a path it refuses,
// say). Any other error is logged and answered with an internal error that says nothing more.
type ThreadFilesFunc func(ctx context.Context, threadID, path string) (data []byte, mimeType string, err error)

// addThreadFiles adds the resource template of thread files, read through read.
func (s *Server) addThreadFiles(read ThreadFilesFunc) {
	limit := s.opts.MaxResourceBytes
	if limit <= 0 {
		limit = DefaultMaxResourceBytes
	}
	s.srv.AddResourceTemplate(&sdk.ResourceTemplate{
		Name:        "thread-file",
		Title:       "A file of a thread",
		Description: "A file of a thread of this workspace (its attachments are under /attachments): text as text, anything else as a base64 blob, with its MIME type.",
		URITemplate: ThreadFileTemplate,
	}, func(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
		uri := req.Params.URI
		threadID, path, err := parseThreadFileURI(uri)
		if err != nil {
			return nil, err
		}
		data, mimeType, err := read(ctx, threadID, path)
		var rpcErr *jsonrpc.Error
		switch {
		case errors.Is(err, ErrResourceNotFound):
			return nil, sdk.ResourceNotFoundError(uri)
		case errors.As(err, &rpcErr):
			return nil, rpcErr
		case err != nil:
			s.logger.Error("mcp: reading a thread's file", "uri", uri, "error", err)
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the file could not be read"}
		}
		if int64(len(data)) > limit {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
				Message: fmt.Sprintf("%s is %d bytes, over the cap of %d bytes a resource may be", uri, len(data), limit)}
		}
		c := &sdk.ResourceContents{URI: uri, MIMEType: cmp.Or(mimeType, "application/octet-stream")}
		if isText(c.MIMEType, data) {
			c.Text = string(data)
		} else {
			c.Blob = data
		}
		return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{c}}, nil
	})
}

// parseThreadFileURI returns the thread id and the absolute path a thread file's URI names.
// The path is percent-decoded; a path with a . or .. segment (traversal), an empty one, or a
// URI with a query or fragment is refused with invalid params. The thread file system's own
// rules (store.CheckPath) are the reader's to apply.
func parseThreadFileURI(uri string) (threadID, path string, err error) {
	refuse := func(why string) (string, string, error) {
		return "", "", &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("%s: %s", uri, why)}
	}
	rest, ok := strings.CutPrefix(uri, threadFilePrefix)
	if !ok {
		return refuse("not a thread file's URI (" + ThreadFileTemplate + ")")
	}
	threadID, raw, ok := strings.Cut(rest, threadFileInfix)
	if !ok || threadID == "" || strings.ContainsAny(threadID, "/?#%") {
		return refuse("not a thread file's URI (" + ThreadFileTemplate + ")")
	}
	if strings.ContainsAny(raw, "?#") {
		return refuse("a thread file's URI has no query or fragment")
	}
	p, err := url.PathUnescape(raw)
	if err != nil || p == "" {
		return refuse("the path is empty or badly escaped")
	}
	for seg := range strings.SplitSeq(p, "/") {
		if seg == "." || seg == ".." {
			return refuse("the path has a . or .. segment: it must stay inside the thread's file system")
		}
	}
	return threadID, "/" + p, nil
}

// isText reports whether a file of this MIME type and content is served as text: valid UTF-8
// of a textual type (text/*, JSON, XML, JavaScript, YAML, ...).
func isText(mimeType string, data []byte) bool {
	mt, _, err := mime.ParseMediaType(mimeType)
	if err != nil || !utf8.Valid(data) {
		return false
	}
	if strings.HasPrefix(mt, "text/") || strings.HasSuffix(mt, "+json") || strings.HasSuffix(mt, "+xml") {
		return true
	}
	switch mt {
	case "application/json", "application/xml", "application/javascript", "application/yaml",
		"application/x-yaml", "application/toml", "application/x-sh", "application/sql", "image/svg+xml":
		return true
	}
	return false
}
