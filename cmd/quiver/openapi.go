package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/a2a"
	"github.com/quiverhq/quiver/openapi"
	"github.com/quiverhq/quiver/server"
)

// registerA2A adds a tool for each of the configuration's A2A agents to reg. An agent whose
// card cannot be read is said on stderr and still gets its tool, which reads the card again
// at each call until it can (a partner that is down does not keep the rest from serving).
func registerA2A(ctx context.Context, file *server.File, reg *quiver.Registry, stderr io.Writer) error {
	remotes, err := file.A2ARemotes()
	if err != nil {
		return err
	}
	for _, r := range remotes {
		t, err := a2a.Tool(ctx, r)
		if err != nil {
			fmt.Fprintf(stderr, "quiver: warning: %v; its tool tries again at each call\n", err)
			if t, err = a2a.Lazy(r, err); err != nil {
				return err
			}
		}
		if err := reg.Register(t); err != nil {
			return fmt.Errorf("a2a %s: %w", r.Name, err)
		}
	}
	return nil
}

// registerOpenAPI adds the tools of the configuration's OpenAPI documents to reg. A document
// that cannot be read or is not valid stops the command, naming the document: its tools are
// configured to be there. The operations left out are said on stderr.
func registerOpenAPI(ctx context.Context, file *server.File, reg *quiver.Registry, stderr io.Writer) error {
	sources, err := file.OpenAPISources(ctx)
	if err != nil {
		return err
	}
	for _, src := range sources {
		im, err := openapi.Tools(ctx, src)
		if err != nil {
			return err
		}
		for _, s := range im.Skipped {
			fmt.Fprintf(stderr, "quiver: openapi %s: %s is not a tool: %s\n", src.Name, s.Operation, s.Reason)
		}
		if err := reg.Register(im.Tools...); err != nil {
			return fmt.Errorf("openapi %s: %w", src.Name, err)
		}
	}
	return nil
}

const importOpenAPIUsage = `quiver tools import-openapi FILE|URL --name N [--server URL]... [--operations LIST] [--credential SCHEME=VARIABLE]... [--config FILE] [--dry-run]`

// toolsImportOpenAPI reads an OpenAPI document, says which tools its operations make, and adds
// it to the configuration file's openapi block (replacing an entry of the same name), so that
// quiver serve, mcp stdio, call and tools list serve and call them.
func (a *app) toolsImportOpenAPI(ctx context.Context, inv *invocation) (int, error) {
	name := inv.fs.String("name", "", "the tools' prefix: an operation listPets becomes NAME.listPets (letters, digits, _ and -)")
	var servers, credentials []string
	inv.fs.Func("server", "a base URL the tools call (repeatable; default: the document's servers); only these are reached", func(s string) error {
		servers = append(servers, s)
		return nil
	})
	operations := inv.fs.String("operations", "", "the operations to import, comma-separated: operationId, tag:NAME or \"METHOD /path\" (default: all)")
	inv.fs.Func("credential", "SCHEME=VARIABLE: the secret variable holding a security scheme's credential (repeatable; default: NAME_SCHEME in capitals)", func(s string) error {
		credentials = append(credentials, s)
		return nil
	})
	config := addConfigFlag(inv.fs)
	dryRun := inv.fs.Bool("dry-run", false, "list the tools the document makes without changing the configuration")
	pos, err := inv.parse(1, 1, "tools import-openapi needs the document: a file or an http(s) URL\n"+importOpenAPIUsage)
	if err != nil {
		return exitUsage, err
	}
	if *name == "" {
		return exitUsage, usagef("tools import-openapi needs --name, the tools' prefix\n%s", importOpenAPIUsage)
	}
	location := pos[0]
	if !strings.HasPrefix(location, "http://") && !strings.HasPrefix(location, "https://") {
		if location, err = filepath.Abs(location); err != nil {
			return exitError, err
		}
	}
	entry := server.OpenAPIConfig{Name: *name, Document: location, Servers: servers}
	for _, op := range strings.Split(*operations, ",") {
		if op = strings.TrimSpace(op); op != "" {
			entry.Operations = append(entry.Operations, op)
		}
	}
	for _, c := range credentials {
		scheme, variable, ok := strings.Cut(c, "=")
		if !ok || scheme == "" || variable == "" {
			return exitUsage, usagef("--credential %q: write SCHEME=VARIABLE, such as api_key=PETSTORE_KEY", c)
		}
		if entry.Credentials == nil {
			entry.Credentials = map[string]string{}
		}
		entry.Credentials[scheme] = variable
	}
	probe := &server.File{OpenAPI: []server.OpenAPIConfig{entry}}
	sources, err := probe.OpenAPISources(ctx)
	if err != nil {
		return exitError, err
	}
	im, err := openapi.Tools(ctx, sources[0])
	if err != nil {
		return exitError, err
	}
	printImport(a.stdout, im)
	if *dryRun {
		return exitOK, nil
	}
	path, _, err := configPath(*config)
	if err != nil {
		return exitError, err
	}
	replaced, err := addOpenAPIEntry(path, entry)
	if err != nil {
		return exitError, err
	}
	verb := "added to"
	if replaced {
		verb = "replaced in"
	}
	fmt.Fprintf(a.stdout, "%s %s: quiver serve, mcp stdio, call and tools list use them.\n", verb, path)
	return exitOK, nil
}

// printImport lists the tools an import makes, the variables they read and what was left out.
func printImport(w io.Writer, im *openapi.Import) {
	fmt.Fprintf(w, "%d tool%s:\n", len(im.Tools), plural(len(im.Tools)))
	var vars []string
	for _, t := range im.Tools {
		fmt.Fprintf(w, "  %s\n", t.Name())
		for _, v := range t.Spec().Variables {
			if !slices.Contains(vars, v.Name) {
				vars = append(vars, v.Name)
			}
		}
	}
	for _, s := range im.Skipped {
		fmt.Fprintf(w, "left out: %s: %s\n", s.Operation, s.Reason)
	}
	if len(vars) > 0 {
		fmt.Fprintf(w, "credentials: set each with quiver vars set NAME --secret: %s\n", strings.Join(vars, ", "))
	}
}

// addOpenAPIEntry writes entry into the openapi block of the configuration file at path
// (created when missing), replacing an entry of the same name. The file is edited as a YAML
// tree, so its comments and the order of its keys stay; the result is checked as a
// configuration before it replaces the file.
func addOpenAPIEntry(path string, entry server.OpenAPIConfig) (replaced bool, _ error) {
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return false, fmt.Errorf("reading the configuration: %w", err)
	}
	var doc yaml.Node
	if len(bytes.TrimSpace(data)) > 0 {
		if err := yaml.Unmarshal(data, &doc); err != nil {
			return false, fmt.Errorf("%s: %w", path, err)
		}
	}
	if doc.Kind == 0 {
		doc = yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{{Kind: yaml.MappingNode, Tag: "!!map"}}}
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return false, fmt.Errorf("%s is not a YAML mapping; it cannot take an openapi block", path)
	}
	var list *yaml.Node
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value == "openapi" {
			list = root.Content[i+1]
		}
	}
	if list == nil {
		list = &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
		root.Content = append(root.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: "openapi"}, list)
	}
	if list.Kind != yaml.SequenceNode {
		return false, fmt.Errorf("%s: openapi is not a list", path)
	}
	var item yaml.Node
	if err := item.Encode(entry); err != nil {
		return false, err
	}
	for i, old := range list.Content {
		var existing server.OpenAPIConfig
		if old.Decode(&existing) == nil && existing.Name == entry.Name {
			list.Content[i], replaced = &item, true
		}
	}
	if !replaced {
		list.Content = append(list.Content, &item)
	}
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return false, err
	}
	if _, err := server.ParseConfig(bytes.NewReader(out.Bytes()), path); err != nil {
		return false, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return false, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".quiver-config-*")
	if err != nil {
		return false, err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(out.Bytes()); err != nil {
		tmp.Close()
		return false, err
	}
	if err := tmp.Close(); err != nil {
		return false, err
	}
	return replaced, os.Rename(tmp.Name(), path)
}
