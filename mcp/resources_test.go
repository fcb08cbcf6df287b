package mcp_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/quiverhq/quiver"
	qmcp "github.com/quiverhq/quiver/mcp"
)

// TestThreadFilesOption: ServerOptions.ThreadFiles is read with the thread id and the
// absolute, percent-decoded path of the URI; a file over MaxResourceBytes is refused; an
// error of the reader other than not found or a *jsonrpc.Error is logged, and answered with
// an internal error that does not repeat it; text that is not UTF-8 is a blob.
func TestThreadFilesOption(t *testing.T) {
	var logs bytes.Buffer
	var gotThread, gotPath string
	srv := qmcp.NewServer(&quiver.Dispatcher{Registry: &quiver.Registry{}}, &qmcp.ServerOptions{
		Logger:           slog.New(slog.NewTextHandler(&logs, nil)),
		MaxResourceBytes: 8,
		ThreadFiles: func(_ context.Context, threadID, path string) ([]byte, string, error) {
			gotThread, gotPath = threadID, path
			switch path {
			case "/big.txt":
				return []byte("more than eight bytes"), "text/plain", nil
			case "/broken":
				return nil, "", errors.New("secret database detail")
			case "/latin1.txt":
				return []byte{0xe9, 't', 0xe9}, "text/plain; charset=iso-8859-1", nil
			}
			return []byte("hi"), "", nil
		},
	})
	st, ct := sdk.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = srv.Run(ctx, st) }()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "c", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	res, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: "quiver://threads/thr_1/files/a%20dir/x.bin"})
	if err != nil {
		t.Fatal(err)
	}
	if gotThread != "thr_1" || gotPath != "/a dir/x.bin" {
		t.Errorf("read %q %q", gotThread, gotPath)
	}
	if c := res.Contents[0]; c.MIMEType != "application/octet-stream" || string(c.Blob) != "hi" || c.Text != "" {
		t.Errorf("no MIME type: %+v", c)
	}

	res, err = cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: "quiver://threads/thr_1/files/latin1.txt"})
	if err != nil {
		t.Fatal(err)
	}
	if c := res.Contents[0]; c.Text != "" || len(c.Blob) != 3 {
		t.Errorf("text that is not UTF-8: %+v", c)
	}

	_, err = cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: "quiver://threads/thr_1/files/big.txt"})
	var we *jsonrpc.Error
	if !errors.As(err, &we) || we.Code != jsonrpc.CodeInvalidParams || !strings.Contains(we.Message, "cap") {
		t.Errorf("a file over the cap: %v", err)
	}

	_, err = cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: "quiver://threads/thr_1/files/broken"})
	if !errors.As(err, &we) || we.Code != jsonrpc.CodeInternalError || strings.Contains(we.Message, "secret") {
		t.Errorf("a failed read: %v", err)
	}
	if !strings.Contains(logs.String(), "secret database detail") {
		t.Errorf("the failure was not logged: %s", logs.String())
	}

	gotPath = ""
	for _, uri := range []string{"quiver://threads/thr_1/files/", "quiver://threads/thr_1/files/a?b=c", "quiver://threads/thr_1/files/x/..%2F..%2Fy"} {
		if _, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: uri}); !errors.As(err, &we) || we.Code != jsonrpc.CodeInvalidParams {
			t.Errorf("%s: %v, want invalid params", uri, err)
		}
	}
	if gotPath != "" {
		t.Errorf("a refused URI was read: %q", gotPath)
	}
}
