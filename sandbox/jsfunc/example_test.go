package jsfunc_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/sandbox/jsfunc"
	"github.com/quiverhq/quiver/schema"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/memstore"
)

func ExampleNew() {
	var in schema.Schema
	_ = json.Unmarshal([]byte(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`), &in)
	tool, err := jsfunc.New(jsfunc.Definition{
		Name:        "forecast",
		Description: "Returns tomorrow's forecast for a city.",
		Code: `export default async function (args, state) {
			const key = state.env("WEATHER_KEY")
			return { city: args.city, sky: "clear", usedKey: key }
		}`,
		InputSchema: &in,
		Variables:   []quiver.Variable{{Name: "WEATHER_KEY", Type: quiver.VarSecret, Required: true}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	reg := &quiver.Registry{}
	if err := reg.Register(tool); err != nil {
		fmt.Println(err)
		return
	}
	d := &quiver.Dispatcher{Registry: reg, Resolver: quiver.Vars{"WEATHER_KEY": "k-123"}}
	r, err := d.Call(context.Background(), "forecast", map[string]string{"city": "Lyon"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(r.Status, string(r.Value))
	// Output: success {"city":"Lyon","sky":"clear","usedKey":"[REDACTED]"}
}

// Store a tool as a function version in a store (here one held in memory), then load the workspace's tools.
func ExampleSave() {
	st := memstore.New()
	defer st.Close()
	ctx := context.Background()
	if err := st.CreateWorkspace(ctx, &store.Workspace{ID: "wsp_demo", Name: "demo"}); err != nil {
		fmt.Println(err)
		return
	}
	doc, err := quiver.ParseSchemaSpec([]byte(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	saved, version, err := jsfunc.Save(ctx, st, "wsp_demo", "", jsfunc.Definition{
		Name: "shout", Description: "Upper-cases a text.", Code: `export default ({ text }) => text.toUpperCase()`,
		InputSchema: doc.InputSchema,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	tools, err := jsfunc.LoadWorkspace(ctx, st, "wsp_demo", jsfunc.Limits{})
	if err != nil {
		fmt.Println(err)
		return
	}
	reg := &quiver.Registry{}
	if err := reg.Register(tools...); err != nil {
		fmt.Println(err)
		return
	}
	r, _ := (&quiver.Dispatcher{Registry: reg}).Call(ctx, "shout", map[string]string{"text": "hi"})
	fmt.Println(saved.Name, version.Version, r.Text)
	// Output: shout 1 HI
}
