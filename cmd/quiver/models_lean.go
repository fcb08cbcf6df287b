//go:build quiver_lean

package main

import (
	"fmt"

	"github.com/quiverhq/quiver/model"
	_ "github.com/quiverhq/quiver/model/scripted" // scripted models need no SDK
)

// A lean build (go build -tags quiver_lean ./cmd/quiver) leaves out the model providers'
// SDKs, whose compilation is most of a cold build's memory (a compile of openai-go's or
// anthropic-sdk-go's root package peaks over 2 GB): it serves tools over MCP and the API,
// calls them and runs scripted agents. Each provider left out still answers, saying how to get
// it, rather than being unknown.
func init() {
	for _, p := range []string{"anthropic", "gemini", "ollama", "openai", "openai-compatible"} {
		model.Register(p, func(name string, _ model.Config) (model.Model, error) {
			return nil, fmt.Errorf("model: %s:%s: this quiver was built with -tags quiver_lean, which leaves out the model providers' SDKs; "+
				"build it without the tag (go install ./cmd/quiver, or go run ./cmd/quiver) to run agents on %s", p, name, p)
		})
	}
}
