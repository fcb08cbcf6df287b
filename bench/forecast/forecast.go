// Package forecast is the one tool every benchmark in bench/ dispatches, get_forecast, with
// what each library's version of it shares: the arguments a model sends, the expected answer,
// the handler and a floor (encoding/json, no validation) to measure against.
//
// It is a module of its own without dependencies, so that benchmark modules whose libraries'
// requirements fight (genkit's and Quiver's) can share it without sharing a module graph.
package forecast

import (
	"encoding/json"
	"reflect"
	"sync/atomic"
)

// The tool's name and description, the same for every library.
const (
	Name        = "get_forecast"
	Description = "Returns the weather forecast for a city over the next 1 to 14 days."
)

// ValidArgs is the call a model sends on every op; InvalidArgs breaks the 1..14 bound on days.
// WantOutput is the answer to ValidArgs.
var (
	ValidArgs   = []byte(`{"city":"Paris","days":3}`)
	InvalidArgs = []byte(`{"city":"Paris","days":30}`)
	WantOutput  = `{"city":"Paris","days":3,"summary":"sunny"}`
)

// Forecast is the tool's result.
type Forecast struct {
	City    string `json:"city"`
	Days    int    `json:"days"`
	Summary string `json:"summary"`
}

// calls counts how often Run ran, so that tests can tell an invalid call was refused before it.
var calls atomic.Int64

// Run is the tool's handler.
func Run(city string, days int) Forecast {
	calls.Add(1)
	return Forecast{City: city, Days: days, Summary: "sunny"}
}

// Calls is how often Run has run.
func Calls() int64 { return calls.Load() }

// Baseline is the floor: decode the arguments with encoding/json (no validation), run the
// handler, encode its result.
func Baseline(raw []byte) ([]byte, error) {
	var in struct {
		City string `json:"city"`
		Days int    `json:"days"`
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, err
	}
	return json.Marshal(Run(in.City, in.Days))
}

// SameJSON reports whether got and want encode the same JSON value.
func SameJSON(got []byte, want string) bool {
	var g, w any
	if json.Unmarshal(got, &g) != nil || json.Unmarshal([]byte(want), &w) != nil {
		return false
	}
	return reflect.DeepEqual(g, w)
}
