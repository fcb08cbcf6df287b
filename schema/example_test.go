package schema_test

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/quiverhq/quiver/schema"
)

type ForecastArgs struct {
	City string `json:"city" description:"City name." minLength:"1"`
	Days int    `json:"days,omitempty" minimum:"1" maximum:"14" default:"3"`
	Unit string `json:"unit,omitempty" enum:"celsius,fahrenheit"`
}

// Infer a schema from a Go type, compile it once, then validate and complete calls.
func Example() {
	s, err := schema.Infer[ForecastArgs]()
	if err != nil {
		panic(err)
	}
	c, err := schema.Compile(s)
	if err != nil {
		panic(err)
	}

	args, _ := schema.Decode([]byte(`{"city":"Paris","days":30,"unit":"kelvin","extra":true}`))
	var ve *schema.ValidationError
	if errors.As(c.Validate(args), &ve) {
		for _, p := range ve.Problems {
			fmt.Println(p)
		}
	}

	args, _ = schema.Decode([]byte(`{"city":"Paris"}`))
	fmt.Println("valid:", c.Validate(args) == nil)
	c.ApplyDefaults(args)
	out, _ := json.Marshal(args)
	fmt.Println(string(out))
	// Output:
	// /: unknown property "extra" (not in the schema)
	// /days: maximum 14, got 30
	// /unit: must be one of "celsius", "fahrenheit", got "kelvin"
	// valid: true
	// {"city":"Paris","days":3}
}

// Render one tool set for two providers; names a provider rejects are mapped, and Inbound maps
// the model's call back.
func ExampleRender() {
	s, _ := schema.Infer[ForecastArgs]()
	tools := []schema.ToolSchema{{Name: "weather.forecast", Description: "Forecasts the weather.", Input: s}}

	anthropic, _ := schema.Render(schema.Anthropic, tools)
	wire, _ := json.Marshal(anthropic)
	fmt.Println(string(wire))

	strict, _ := schema.Render(schema.OpenAIStrict, tools)
	wire, _ = json.Marshal(strict)
	fmt.Println(string(wire))

	name, args, ok := strict.Inbound("weather_forecast", []byte(`{"city":"Oslo","days":null,"unit":"celsius"}`))
	fmt.Println(name, string(args), ok)
	// Output:
	// [{"description":"Forecasts the weather.","input_schema":{"type":"object","properties":{"city":{"type":"string","description":"City name.","minLength":1},"days":{"type":"integer","default":3,"minimum":1,"maximum":14},"unit":{"type":"string","enum":["celsius","fahrenheit"]}},"required":["city"],"additionalProperties":false},"name":"weather_forecast"}]
	// [{"function":{"description":"Forecasts the weather. (Constraints: city has at least 1 characters; days defaults to 3.)","name":"weather_forecast","parameters":{"type":"object","properties":{"city":{"type":"string","description":"City name."},"days":{"type":["integer","null"],"minimum":1,"maximum":14},"unit":{"type":["string","null"],"enum":["celsius","fahrenheit",null]}},"required":["city","days","unit"],"additionalProperties":false},"strict":true},"type":"function"}]
	// weather.forecast {"city":"Oslo","unit":"celsius"} true
}
