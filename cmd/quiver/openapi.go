package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/config"
	"github.com/quiverhq/quiver/openapi"
	"github.com/quiverhq/quiver/platform"
)

// registerA2A adds a tool for each of the configuration's A2A agents to reg, built as every node
// builds the fleet's (platform.BuildSharedTools). An agent whose card cannot be read is said on
// stderr and still gets its tool, which reads the card again at each call until it can (a
// partner that is down does not keep the rest from serving).
func registerA2A(ctx context.Context, file *config.File, reg *quiver.Registry, stderr io.Writer) error {
	var part config.File
	part.A2A = file.A2A
	return registerShared(ctx, &platform.Configuration{File: &part}, reg, stderr)
}

// registerOpenAPI adds the tools of the configuration's OpenAPI documents to reg, built as
// every node builds the fleet's. A document that cannot be read or is not valid stops the
// command, naming the document: its tools are configured to be there. The operations left out
// are said on stderr.
func registerOpenAPI(ctx context.Context, file *config.File, reg *quiver.Registry, stderr io.Writer) error {
	sources, err := file.OpenAPISources(ctx)
	if err != nil {
		return err
	}
	part := config.File{OpenAPI: file.OpenAPI}
	docs := map[string][]byte{}
	for _, s := range sources {
		docs[s.Name] = s.Document
	}
	return registerShared(ctx, &platform.Configuration{File: &part, Documents: docs}, reg, stderr)
}

// registerShared adds the tools of c's sources to reg.
func registerShared(ctx context.Context, c *platform.Configuration, reg *quiver.Registry, stderr io.Writer) error {
	built := platform.BuildSharedTools(ctx, c, reg, warnings(stderr))
	if built.Broken != nil {
		return built.Broken
	}
	for _, s := range built.Skipped {
		fmt.Fprintf(stderr, "quiver: openapi %s: %s is not a tool: %s\n", s.Source, s.Operation, s.Reason)
	}
	return reg.Register(built.Tools...)
}

// warnings is a logger of warnings for a command's standard error.
func warnings(stderr io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

const importOpenAPIUsage = `quiver tools import-openapi FILE|URL --name N [--server URL]... [--operations LIST] [--max-operations N] [--strict] [--credential SCHEME=VARIABLE]... [--requires-confirmation | --confirm-writes] [--config FILE] [--dry-run]`

// importFlags are the names import-openapi's errors give the source's settings: its flags.
var importFlags = openapi.Settings{Servers: "--server", Operations: "--operations", MaxOperations: "--max-operations"}

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
	maxOps := inv.fs.Int("max-operations", 0, fmt.Sprintf("raise the cap of operations imported (default %d, at most %d)", openapi.MaxOperations, openapi.MaxDocumentOperations))
	strict := inv.fs.Bool("strict", false, "an answer that does not match the document's schema of it fails the call (default: passed through with a warning)")
	confirmAll := inv.fs.Bool("requires-confirmation", false, "every operation's calls wait for a person's decision")
	confirmWrites := inv.fs.Bool("confirm-writes", false, "the calls of every operation that is not read-only (not GET, HEAD or OPTIONS) wait for a person's decision")
	configFlag := addConfigFlag(inv.fs)
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
	if *maxOps < 0 || *maxOps > openapi.MaxDocumentOperations {
		return exitUsage, usagef("--max-operations %d: give 1 to %d (0: the default, %d)", *maxOps, openapi.MaxDocumentOperations, openapi.MaxOperations)
	}
	entry := config.OpenAPI{Name: *name, Document: location, Servers: servers, RequiresConfirmation: *confirmAll,
		MaxOperations: *maxOps, Strict: *strict}
	if *confirmWrites && !*confirmAll {
		entry.Governance = []quiver.Rule{{When: quiver.Hints{ReadOnly: quiver.Hint(false)}, RequiresConfirmation: quiver.Hint(true)}}
	}
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
	doc, err := openapi.Load(ctx, location, nil)
	if err != nil {
		return exitError, err
	}
	src := entry.Source(doc)
	src.Settings = importFlags
	im, err := openapi.Tools(ctx, src)
	if err != nil {
		return exitError, err
	}
	printImport(a.stdout, im)
	if *dryRun {
		return exitOK, nil
	}
	path, _, err := configPath(*configFlag)
	if err != nil {
		return exitError, err
	}
	replaced, err := addOpenAPIEntry(path, entry)
	if err != nil {
		return exitError, err
	}
	if err := a.sayImported(ctx, inv, path, replaced); err != nil {
		return exitError, err
	}
	return exitOK, nil
}

// sayImported says where the import was written, and what serves it: the fleet's
// configuration, when the database keeps one (the file is then how to change it, not what is
// served), else the file.
func (a *app) sayImported(ctx context.Context, inv *invocation, path string, replaced bool) error {
	verb := "added to"
	if replaced {
		verb = "replaced in"
	}
	fleet, err := a.fleetVersion(ctx, inv)
	if err != nil {
		return err
	}
	if fleet > 0 {
		fmt.Fprintf(a.stdout, "%s %s. The database keeps the fleet's configuration (version %d), which every node and command serves: "+
			"quiver apply -f %s makes this import part of it (running nodes follow within a second).\n", verb, path, fleet, path)
		return nil
	}
	fmt.Fprintf(a.stdout, "%s %s: quiver serve, mcp stdio, call and tools list use them.\n", verb, path)
	return nil
}

// fleetVersion is the version of the fleet's configuration the command's database keeps; 0
// when it keeps none, or when there is no database yet.
func (a *app) fleetVersion(ctx context.Context, inv *invocation) (int64, error) {
	if !inv.store.exists() {
		return 0, nil
	}
	db, err := inv.open(ctx)
	if err != nil {
		return 0, err
	}
	_, version, err := platform.LatestConfiguration(ctx, db)
	return version, err
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
func addOpenAPIEntry(path string, entry config.OpenAPI) (replaced bool, _ error) {
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
		var existing config.OpenAPI
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
	if _, err := config.Parse(bytes.NewReader(out.Bytes()), path); err != nil {
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
