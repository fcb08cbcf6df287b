package sandbox

import (
	"errors"
	"fmt"

	"modernc.org/quickjs"
)

// Check parses source as a module of the given language without running it, so that code
// stored for later runs (a function tool's) is refused when it is defined rather than failing
// on every call. The error says where the source is wrong.
func Check(filename, source string, lang Language) error {
	switch lang {
	case "", JavaScript:
	case TypeScript:
		js, err := Transpile(filename, source)
		if err != nil {
			return err
		}
		source = js
	default:
		return fmt.Errorf("sandbox: language %q is not supported; use %q or %q", lang, JavaScript, TypeScript)
	}
	vm, err := quickjs.NewVM()
	if err != nil {
		return err
	}
	defer vm.Close()
	vm.SetMemoryLimit(DefaultMemoryLimit)
	vm.SetEvalTimeout(DefaultTimeout) // parsing only, but a parser fed enough can take its time
	// Imports are resolved when the code runs, with the modules of that run: here any import
	// is an empty module, which is never parsed further.
	vm.SetModuleLoader(func(*quickjs.VM, string) (string, error) { return "", nil }, nil)
	if _, err := vm.Compile(source, quickjs.EvalModule); err != nil {
		var e *quickjs.Error
		if errors.As(err, &e) && e.LineNumber > 0 {
			return fmt.Errorf("%s:%d:%d: %s: %s", filename, e.LineNumber, e.ColumnNumber, e.Name, e.Message)
		}
		return fmt.Errorf("%s: %w", filename, err)
	}
	return nil
}
