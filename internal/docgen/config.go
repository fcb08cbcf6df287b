// Package docgen makes the reference page that is generated from the code, the configuration
// file's (docs/reference/config.md, from package config's Go types, their yaml tags and doc
// comments, and the example in File's doc comment), and checks the hand-written environment
// and metrics pages against the code. go generate runs internal/cmd/docgen, which writes the
// page; this package's tests fail when a committed page is not what the code makes.
package docgen

//go:generate go run ../cmd/docgen -root ../..

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/quiverhq/quiver/config"
)

// Module is the module path the packages' directories are found under.
const Module = "github.com/quiverhq/quiver"

// Regenerate is the command that remakes the generated pages, from the repository's root.
const Regenerate = "go generate ./internal/docgen (or: go run ./internal/cmd/docgen)"

// field is one field of the configuration file, as the page describes it.
type field struct {
	key, kind, def, example, about string
}

// section is one YAML object of the file: its path ("mcp.servers[]") and its fields.
type section struct {
	path, goType, about string
	fields              []field
}

// Config is docs/reference/config.md: every object of the configuration file (config.File and
// the types under it) with each field's key, type, default, example and description. The
// descriptions are the fields' doc comments; the examples are the values of File's example; a default is what the description
// says after "default". root is the repository's root, where the packages' sources are read.
// A field with no doc comment or no example is an error naming it, so that no row is blank.
func Config(root string) (string, error) {
	comments, err := newComments(root)
	if err != nil {
		return "", err
	}
	example, err := fileExample(comments.typeDoc(reflect.TypeFor[config.File]()))
	if err != nil {
		return "", err
	}
	var sections []section
	var missing, undocumented []string
	walkConfig(reflect.TypeFor[config.File](), comments, example, &sections, &missing, &undocumented)
	if len(missing) > 0 {
		return "", fmt.Errorf("docgen: File's doc comment (config/config.go) has no example of %s: add one to its example file", strings.Join(missing, ", "))
	}
	if len(undocumented) > 0 {
		return "", fmt.Errorf("docgen: %s: give each field a doc comment saying what it means (a field of an anonymous struct type has none: name the type)", strings.Join(undocumented, ", "))
	}
	var b strings.Builder
	b.WriteString("# The configuration file\n\n")
	b.WriteString("<!-- Generated from package config's Go types and doc comments by " + Regenerate + ". Do not edit. -->\n\n")
	b.WriteString("`quiver.yaml` (YAML, or JSON, which YAML reads too) holds what every workspace shares: remote MCP servers, OpenAPI documents and ")
	b.WriteString("A2A agents whose operations become tools, the operator's governance rules, the identity provider tokens come from, ")
	b.WriteString("and who may see and call which tool of the server's own workspace (its entitlements). ")
	b.WriteString("`quiver serve`, `quiver mcp stdio`, `quiver call` and `quiver tools list` read it from `--config`, else `$QUIVER_CONFIG`, else `quiver.yaml` ")
	b.WriteString("in the data directory; `quiver apply -f` makes it the fleet's (every block but `oidc`, which is each node's own). ")
	b.WriteString("An unknown key is an error naming it. `${VAR}` in `env`, `headers` and `oauth` values is replaced by the environment variable `VAR`.\n\n")
	b.WriteString("A whole file:\n\n```yaml\n" + example.text + "```\n")
	for _, s := range sections {
		fmt.Fprintf(&b, "\n## %s\n\n", s.path)
		if s.about != "" {
			b.WriteString(s.about + "\n\n")
		}
		fmt.Fprintf(&b, "Go type: `%s`.\n\n| Key | Type | Default | Example | What it is |\n|---|---|---|---|---|\n", s.goType)
		for _, f := range s.fields {
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", f.key, f.kind, f.def, f.example, cell(f.about))
		}
	}
	return b.String(), nil
}

// walkConfig adds the section of struct type t at path, then those of the objects under it.
// A type met again (the governance rules every source has) is described once, where it is
// first met, and its examples are looked for at every path it is met at.
// A field with no example is added to missing, one with no doc comment to undocumented
// (Go type.Field: the file's key).
func walkConfig(root reflect.Type, c *comments, ex *example, sections *[]section, missing, undocumented *[]string) {
	type place struct {
		t    reflect.Type
		path string
	}
	paths := map[reflect.Type][]string{}
	// inlinedAt are the paths of the objects a type's fields are inlined into (an entitlement
	// rule's tool selector): where else the example may show them.
	inlinedAt := map[reflect.Type][]string{}
	var order []reflect.Type
	queue := []place{{root, ""}}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if _, seen := paths[p.t]; !seen {
			order = append(order, p.t)
		}
		paths[p.t] = append(paths[p.t], p.path)
		for _, sf := range yamlFields(p.t) {
			if elem := objectType(sf.Type); elem != nil {
				queue = append(queue, place{elem, subPath(p.path, sf)})
			}
			if len(sf.Index) > 1 {
				in := declaredIn(p.t, sf)
				inlinedAt[in] = append(inlinedAt[in], p.path)
			}
		}
	}
	first := map[reflect.Type]string{}
	for _, t := range order {
		first[t] = paths[t][0]
	}
	for _, t := range order {
		path := first[t]
		s := section{path: cmpOr(path, "The file"), goType: goTypeName(t), about: firstParagraph(c.typeDoc(t))}
		if path == "" {
			s.about = "The top level of the file."
		}
		for _, sf := range yamlFields(t) {
			f, found := describeField(t, sf, append(slices.Clone(paths[t]), inlinedAt[t]...), first, c, ex)
			key := strings.TrimPrefix(strings.ReplaceAll(path, "[]", "")+"."+f.key, ".")
			if !found {
				*missing = append(*missing, key)
			}
			if f.about == "" {
				*undocumented = append(*undocumented, fmt.Sprintf("%s.%s (%s)", goTypeName(declaredIn(t, sf)), sf.Name, key))
			}
			s.fields = append(s.fields, f)
		}
		*sections = append(*sections, s)
	}
}

// describeField describes field sf of t, which the file has at paths (first says where each
// object type is described); found is false when the example has no value for it.
func describeField(t reflect.Type, sf reflect.StructField, paths []string, first map[reflect.Type]string, c *comments, ex *example) (f field, found bool) {
	key := yamlKey(sf)
	f = field{key: key, kind: yamlKind(sf.Type)}
	for _, at := range paths {
		p := strings.ReplaceAll(strings.TrimPrefix(at+"."+key, "."), "[]", "")
		if v, ok := ex.values[p]; ok && !found {
			f.example, found = "`"+strings.ReplaceAll(v, "|", `\|`)+"`", true
		}
	}
	// The doc comment alone: the example's comments are fragments of sentences that run on
	// over several keys.
	f.about = oneLine(c.fieldDoc(declaredIn(t, sf), sf.Name))
	// A comment opens with the field's name ("Default is ..."): not a default.
	f.def = defaultOf(strings.TrimPrefix(f.about, sf.Name+" "))
	// A pointer's absence is not false: an unset hint selects by neither value.
	if f.def == "none" && sf.Type.Kind() == reflect.Bool {
		f.def = "`false`"
	}
	if elem := objectType(sf.Type); elem != nil {
		f.kind = fmt.Sprintf("[%s](#%s)", f.kind, anchor(first[elem]))
		f.example, found = "see below", true
	}
	return f, found
}

// yamlFields are t's fields that the file sets: exported, with a yaml key, and the fields of
// a struct inlined (yaml:",inline"), their Index the path to them from t.
func yamlFields(t reflect.Type) []reflect.StructField {
	var out []reflect.StructField
	for i := range t.NumField() {
		sf := t.Field(i)
		switch {
		case !sf.IsExported():
		case slices.Contains(strings.Split(sf.Tag.Get("yaml"), ",")[1:], "inline") && deref(sf.Type).Kind() == reflect.Struct:
			for _, in := range yamlFields(deref(sf.Type)) {
				in.Index = append([]int{i}, in.Index...)
				out = append(out, in)
			}
		case yamlKey(sf) != "" && yamlKey(sf) != "-":
			out = append(out, sf)
		}
	}
	return out
}

// declaredIn is the struct type that declares sf, a field yamlFields gave of t: t, or the
// struct inlined in t that holds it.
func declaredIn(t reflect.Type, sf reflect.StructField) reflect.Type {
	for _, i := range sf.Index[:len(sf.Index)-1] {
		t = deref(t.Field(i).Type)
	}
	return t
}

func yamlKey(sf reflect.StructField) string {
	key, _, _ := strings.Cut(sf.Tag.Get("yaml"), ",")
	return key
}

// subPath is the path of the object field sf holds, under path: "mcp.servers[]".
func subPath(path string, sf reflect.StructField) string {
	p := strings.TrimPrefix(path+"."+yamlKey(sf), ".")
	if deref(sf.Type).Kind() == reflect.Slice {
		p += "[]"
	}
	return p
}

// goTypeName is "config.MCPServer", or "struct" for an anonymous type.
func goTypeName(t reflect.Type) string {
	if t.Name() == "" {
		return "struct"
	}
	return t.PkgPath()[strings.LastIndex(t.PkgPath(), "/")+1:] + "." + t.Name()
}

// objectType is the struct type a field holds (itself, through a pointer, or as a list's
// items), nil when it holds no object: a struct that reads itself from text (a duration) is a
// value.
func objectType(t reflect.Type) reflect.Type {
	t = deref(t)
	if t.Kind() == reflect.Slice {
		t = deref(t.Elem())
	}
	if t.Kind() != reflect.Struct || reflect.PointerTo(t).Implements(reflect.TypeFor[interface{ UnmarshalText([]byte) error }]()) {
		return nil
	}
	return t
}

func deref(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// yamlKind names the YAML type of a Go type: "string", "list of string", "object"...
func yamlKind(t reflect.Type) string {
	t = deref(t)
	switch {
	case t.Name() == "Duration":
		return "duration (`30s`, `2m`)"
	case t.Kind() == reflect.Slice:
		return "list of " + strings.TrimPrefix(yamlKind(t.Elem()), "list of ")
	case t.Kind() == reflect.Map:
		return "map of " + yamlKind(t.Key()) + " to " + yamlKind(t.Elem())
	case t.Kind() == reflect.Struct:
		return "object"
	case t.Kind() == reflect.Bool:
		return "boolean"
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Uint64:
		return "integer"
	case t.Kind() == reflect.String:
		return "string"
	}
	return t.Kind().String()
}

// defaultOf is what a description says is the default ("default 60s", "(default: the
// document's)", "allow (the default)"), "none" when it says nothing.
func defaultOf(about string) string {
	m := regexp.MustCompile(`(?i)\bdefault:?\s+([^;,)]+)`).FindStringSubmatch(about)
	if m == nil {
		// "allow (the default) or deny"
		m = regexp.MustCompile(`(\w+) \(the default\)`).FindStringSubmatch(about)
	}
	if m == nil {
		return "none"
	}
	return strings.TrimSuffix(strings.TrimSpace(m[1]), ".")
}

// example is File's example: the YAML text and each key's first value as YAML writes it (by
// path, "mcp.servers.name").
type example struct {
	text   string
	values map[string]string
}

// fileExample reads the example file indented in File's doc comment.
func fileExample(docText string) (*example, error) {
	var lines []string
	for line := range strings.Lines(docText) {
		if strings.HasPrefix(line, "\t") || (len(lines) > 0 && strings.TrimSpace(line) == "") {
			lines = append(lines, strings.TrimPrefix(line, "\t"))
		} else if len(lines) > 0 {
			break
		}
	}
	ex := &example{text: strings.TrimRight(strings.Join(lines, ""), "\n") + "\n", values: map[string]string{}}
	var root yaml.Node
	if err := yaml.Unmarshal([]byte(ex.text), &root); err != nil {
		return nil, fmt.Errorf("docgen: File's example does not parse: %v", err)
	}
	if _, err := config.Parse(strings.NewReader(ex.text), "File's example"); err != nil {
		return nil, fmt.Errorf("docgen: File's example is not a valid configuration: %v", err)
	}
	ex.walk(&root, "")
	return ex, nil
}

func (ex *example) walk(n *yaml.Node, path string) {
	switch n.Kind {
	case yaml.DocumentNode, yaml.SequenceNode:
		for _, c := range n.Content {
			ex.walk(c, path)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := strings.TrimPrefix(path+"."+k.Value, ".")
			if _, seen := ex.values[p]; !seen {
				ex.values[p] = flowText(v)
			}
			ex.walk(v, p)
		}
	}
}

// flowText writes a node on one line, as YAML's flow style does.
func flowText(n *yaml.Node) string {
	c := *n
	c.Style, c.LineComment, c.HeadComment, c.FootComment = yaml.FlowStyle, "", "", ""
	if n.Kind == yaml.ScalarNode {
		c.Style = n.Style &^ yaml.LiteralStyle
	}
	out, err := yaml.Marshal(&c)
	if err != nil {
		return n.Value
	}
	return strings.TrimSpace(string(out))
}

// comments are the doc comments of the types and fields of the module's packages.
type comments struct {
	root     string
	packages map[string][]*ast.File // by import path: the package's files, tests aside
	fset     *token.FileSet
}

func newComments(root string) (*comments, error) {
	return &comments{root: root, packages: map[string][]*ast.File{}, fset: token.NewFileSet()}, nil
}

// typeSpec finds t's declaration in its package's source.
func (c *comments) typeSpec(t reflect.Type) (*ast.TypeSpec, *ast.GenDecl) {
	if t.Name() == "" {
		return nil, nil
	}
	for _, f := range c.files(t.PkgPath()) {
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok {
				continue
			}
			for _, s := range gd.Specs {
				if ts, ok := s.(*ast.TypeSpec); ok && ts.Name.Name == t.Name() {
					return ts, gd
				}
			}
		}
	}
	return nil, nil
}

// files are the Go files (tests aside) of the module's package path, parsed with comments.
func (c *comments) files(path string) []*ast.File {
	if files, ok := c.packages[path]; ok {
		return files
	}
	var files []*ast.File
	if rel, ok := strings.CutPrefix(path, Module); ok {
		dir := filepath.Join(c.root, filepath.FromSlash(strings.TrimPrefix(rel, "/")))
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if name := e.Name(); strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go") {
				if f, err := parser.ParseFile(c.fset, filepath.Join(dir, name), nil, parser.ParseComments); err == nil {
					files = append(files, f)
				}
			}
		}
	}
	c.packages[path] = files
	return files
}

// typeDoc is t's doc comment.
func (c *comments) typeDoc(t reflect.Type) string {
	ts, gd := c.typeSpec(t)
	switch {
	case ts == nil:
		return ""
	case ts.Doc != nil:
		return ts.Doc.Text()
	case gd.Doc != nil:
		return gd.Doc.Text()
	}
	return ""
}

// fieldDoc is the doc comment (else the line comment) of t's field name; for a field of an
// anonymous struct type, "".
func (c *comments) fieldDoc(t reflect.Type, name string) string {
	ts, _ := c.typeSpec(t)
	if ts == nil {
		return ""
	}
	st, ok := ts.Type.(*ast.StructType)
	if !ok {
		return ""
	}
	for _, f := range st.Fields.List {
		for _, n := range f.Names {
			if n.Name != name {
				continue
			}
			switch {
			case f.Doc != nil:
				return f.Doc.Text()
			case f.Comment != nil:
				return f.Comment.Text()
			}
		}
	}
	return ""
}

// firstParagraph is a doc comment's first paragraph, on one line, with go/doc's links
// ([mcp.OAuth]) as plain text.
func firstParagraph(text string) string {
	p, _, _ := strings.Cut(text, "\n\n")
	return oneLine(p)
}

func oneLine(text string) string {
	text = strings.Join(strings.Fields(text), " ")
	return regexp.MustCompile(`\[([\w.*]+)\]`).ReplaceAllString(text, "`$1`")
}

// cell makes text fit a table's cell.
func cell(text string) string {
	return strings.ReplaceAll(text, "|", `\|`)
}

// anchor is GitHub's anchor of a heading ("mcp.servers[]" makes "mcpservers").
func anchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		if r == ' ' {
			b.WriteByte('-')
		} else if r == '-' || r == '_' || ('a' <= r && r <= 'z') || ('0' <= r && r <= '9') {
			b.WriteRune(r)
		}
	}
	return b.String()
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
