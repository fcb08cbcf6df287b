package a2a_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	a2asdk "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/a2a"
)

type hello struct{}

func (hello) Execute(ctx context.Context, _ *a2asrv.RequestContext, q eventqueue.Queue) error {
	return q.Write(ctx, a2asdk.NewMessage(a2asdk.MessageRoleAgent, a2asdk.TextPart{Text: "Hello from another platform."}))
}

func (hello) Cancel(context.Context, *a2asrv.RequestContext, eventqueue.Queue) error { return nil }

// An agent another platform serves over A2A (here the SDK's own server, on loopback) becomes
// a tool, called through the dispatcher like any other.
func ExampleTool() {
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	defer srv.Close()
	card := &a2asdk.AgentCard{Name: "Hello", Description: "Says hello.", URL: srv.URL + "/invoke", Version: "1",
		PreferredTransport: a2asdk.TransportProtocolJSONRPC, DefaultInputModes: []string{"text"}, DefaultOutputModes: []string{"text"}}
	mux.Handle("/invoke", a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(hello{})))
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(card))

	ctx := context.Background()
	tool, err := a2a.Tool(ctx, a2a.Remote{Name: "hello", URL: srv.URL})
	if err != nil {
		panic(err)
	}
	reg := &quiver.Registry{}
	if err := reg.Register(tool); err != nil {
		panic(err)
	}
	res, err := (&quiver.Dispatcher{Registry: reg}).Call(ctx, "hello", map[string]any{"message": "hi"})
	if err != nil {
		panic(err)
	}
	fmt.Println(string(res.Value))
	// Output: {"answer":"Hello from another platform.","state":"completed"}
}
