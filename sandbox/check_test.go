package sandbox

import (
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	tests := []struct {
		name, src string
		lang      Language
		has       string // "" for valid source
	}{
		{"valid module", "import x, {y} from './x.js'; import z from 'config'; export default () => [x, y, z]", JavaScript, ""},
		{"valid TypeScript", "export default (a: number): number => a", TypeScript, ""},
		{"JavaScript syntax error says where", "export default () => {\n  return ]\n}", JavaScript, "tool.js:2:"},
		{"TypeScript syntax error says where", "const a: = 1", TypeScript, "tool.js:1:"},
		{"unknown language", "1", "rust", `language "rust" is not supported`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Check("tool.js", tt.src, tt.lang)
			switch {
			case tt.has == "" && err != nil:
				t.Errorf("error %v for valid source", err)
			case tt.has != "" && (err == nil || !strings.Contains(err.Error(), tt.has)):
				t.Errorf("error %v, want one containing %q", err, tt.has)
			}
		})
	}
}
