package platform_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/store/memstore"
)

// A platform over a store (here one held in memory): each workspace calls the shared tools (and its stored
// ones) through a dispatcher over its registry, as every door does.
func ExampleNew() {
	st := memstore.New()
	defer st.Close()
	shared := &quiver.Registry{}
	_ = shared.Register(quiver.Func("greet", "Greets someone by name.", func(_ context.Context, in struct {
		Name string `json:"name"`
	}) (string, error) {
		return "Hello, " + in.Name + "!", nil
	}))
	p, err := platform.New(platform.Config{Store: st, Registry: shared})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	d := &quiver.Dispatcher{Registry: p.Workspace(ctx, "wsp_local").Registry()}
	r, err := d.Dispatch(ctx, quiver.Call{ID: "call_1", Name: "greet", Args: json.RawMessage(`{"name":"Ada"}`)})
	if err != nil {
		panic(err)
	}
	fmt.Println(r.Text)
	// Output: Hello, Ada!
}
