// Package all registers every model provider with model.Open: import it for its side effect.
//
//	import _ "github.com/quiverhq/quiver/model/all"
package all

import (
	_ "github.com/quiverhq/quiver/model/anthropic" // anthropic
	_ "github.com/quiverhq/quiver/model/gemini"    // gemini
	_ "github.com/quiverhq/quiver/model/openai"    // openai, ollama, openai-compatible
	_ "github.com/quiverhq/quiver/model/scripted"  // scripted
)
