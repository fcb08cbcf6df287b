package openapi_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/openapi"
)

// A service's OpenAPI document becomes tools; a call is validated by the dispatcher, then
// sent to the service. In practice the document comes from openapi.Load (a file or a URL).
func ExampleTools() {
	weather := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"city":%q,"celsius":21}`, r.URL.Query().Get("city"))
	}))
	defer weather.Close()
	doc := []byte(`
openapi: 3.0.3
info: {title: Weather, version: "1"}
paths:
  /weather:
    get:
      operationId: getWeather
      summary: The weather in a city now.
      parameters:
        - {name: city, in: query, required: true, schema: {type: string}}
      responses:
        '200': {description: ok, content: {application/json: {schema: {type: object}}}}
`)
	ctx := context.Background()
	im, err := openapi.Tools(ctx, openapi.Source{Name: "weather", Document: doc, Servers: []string{weather.URL}})
	if err != nil {
		panic(err)
	}
	reg := &quiver.Registry{}
	if err := reg.Register(im.Tools...); err != nil {
		panic(err)
	}
	d := &quiver.Dispatcher{Registry: reg}
	res, err := d.Call(ctx, "weather.getWeather", map[string]any{"city": "Lyon"})
	if err != nil {
		panic(err)
	}
	fmt.Println(string(res.Value))
	res, _ = d.Call(ctx, "weather.getWeather", map[string]any{})
	fmt.Println(res.Code)
	// Output:
	// {"city":"Lyon","celsius":21}
	// invalid_arguments
}
