package sandbox

import (
	"fmt"
	"path"
	"slices"
	"strings"
)

// extensions are tried, in order, for an import that names no module exactly, as TypeScript
// and bundlers resolve "./util" to "./util.ts" or "./util/index.js".
var extensions = []string{".js", ".ts", ".mjs", "/index.js", "/index.ts"}

// resolve is the module normalizer: it names the module that specifier name, imported from
// the module base, refers to, or says why there is none.
func (c *config) resolve(base, name string) (string, error) {
	switch {
	case strings.HasPrefix(name, "./") || strings.HasPrefix(name, "../"):
		return c.resolveRelative(base, name)
	case strings.HasPrefix(name, "/"):
		return "", fmt.Errorf("import %q in %s: absolute paths are not available (there is no file system); import the run's modules by relative path, like \"./util.js\"", name, base)
	}
	if _, ok := c.imports[name]; ok {
		return name, nil
	}
	return "", c.unavailable(base, name)
}

// resolveRelative names the run's module a relative specifier refers to: the module of that
// name, or of that name with one of the extensions.
func (c *config) resolveRelative(base, name string) (string, error) {
	key := path.Join(path.Dir(base), name)
	if key == ".." || strings.HasPrefix(key, "../") {
		return "", fmt.Errorf("import %q in %s leaves the run's root", name, base)
	}
	if _, ok := c.sources[key]; ok {
		return key, nil
	}
	for _, ext := range extensions {
		if _, ok := c.sources[key+ext]; ok {
			return key + ext, nil
		}
	}
	return "", fmt.Errorf("module %q imported by %s does not exist; the run's modules are %s", name, base, c.moduleList())
}

// unavailable is the error of a bare import the host does not provide: it says what the host
// provides, and the module the code may have meant.
func (c *config) unavailable(base, name string) error {
	msg := fmt.Sprintf("import %q in %s is not available: the sandbox has no file system, network, process, environment or standard modules (node:*, std, os); ", name, base)
	if len(c.imports) == 0 {
		msg += "the host provides no imports"
	} else {
		msg += "the host provides " + quotedKeys(c.imports)
	}
	if _, ok := c.sources[path.Clean(name)]; ok {
		msg += fmt.Sprintf("; did you mean %q?", "./"+path.Clean(name))
	}
	return fmt.Errorf("%s", msg)
}

// load is the module loader: the source of a module resolve named.
func (c *config) load(name string) (string, error) {
	if src, ok := c.sources[name]; ok {
		return src, nil
	}
	if src, ok := c.imports[name]; ok {
		return src, nil
	}
	return "", fmt.Errorf("module %q does not exist; the run's modules are %s", name, c.moduleList())
}

func (c *config) moduleList() string {
	names := make([]string, 0, len(c.sources))
	for k := range c.sources {
		names = append(names, "./"+k)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

func quotedKeys(m map[string]string) string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, fmt.Sprintf("%q", k))
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}
