package sandbox

import (
	"fmt"
	"strings"

	"github.com/evanw/esbuild/pkg/api"
)

// Transpile turns TypeScript into JavaScript the sandbox runs, in-process: types are erased,
// nothing is type-checked. filename appears in error messages. The error says where the
// source is wrong (file:line:column) and what was expected.
func Transpile(filename, source string) (string, error) {
	out := api.Transform(source, api.TransformOptions{
		Loader:     api.LoaderTS,
		Format:     api.FormatESModule,
		Target:     api.ES2022,
		Sourcefile: filename,
		LogLevel:   api.LogLevelSilent,
	})
	if len(out.Errors) > 0 {
		msgs := make([]string, 0, len(out.Errors))
		for _, e := range out.Errors {
			if l := e.Location; l != nil {
				msgs = append(msgs, fmt.Sprintf("%s:%d:%d: %s", l.File, l.Line, l.Column+1, e.Text))
			} else {
				msgs = append(msgs, e.Text)
			}
		}
		return "", fmt.Errorf("%s", strings.Join(msgs, "; "))
	}
	return string(out.Code), nil
}

// transpileAll transpiles every module of c in place, or returns the result of the first that
// does not parse.
func transpileAll(c *config) *Result {
	for name, src := range c.sources {
		js, err := Transpile(name, src)
		if err != nil {
			return &Result{Status: StatusError, ErrorName: "SyntaxError", ErrorMessage: err.Error()}
		}
		c.sources[name] = js
	}
	return nil
}
