package quiver_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/config"
	"github.com/quiverhq/quiver/internal/mdblocks"
)

// The pages' code blocks are what a reader copies, so the tests check every one of them, in
// README.md, CONTRIBUTING.md and every .md file under docs/ (a new page is checked without
// being named here):
//
//   - Go blocks compile, and a program that ends with "// Output:" prints what it says
//     (TestDocsGoBlocks);
//   - JSON blocks parse (TestDocsJSONBlocks);
//   - YAML blocks parse as what they are: a configuration file, an agent or prompt definition,
//     an identity provider's rules file or a Kubernetes manifest (TestDocsYAMLBlocks);
//   - shell blocks name commands that exist, quiver's with flags its command table has, and
//     the quiver commands that run offline are run (cmd/quiver/docs_shell_test.go);
//   - text blocks (```text, or no language) are output and pictures, shown as they are.
//
// A block no test can check says so on its fence, with the reason: ```go {no-test: why}.
// TestDocsBlocksHaveATest lists them.

// docPages returns every page the documentation tests read, and its blocks.
func docPages(t *testing.T) map[string][]mdblocks.Block {
	t.Helper()
	pages, err := mdblocks.Pages(".")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]mdblocks.Block{}
	for _, page := range pages {
		md, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		blocks, err := mdblocks.Blocks(page, string(md))
		if err != nil {
			t.Fatal(err)
		}
		out[page] = blocks
	}
	return out
}

// docBlocks returns the blocks of every page in one of langs, in the pages' order, leaving
// out (and counting) those whose fence says no-test.
func docBlocks(t *testing.T, langs ...string) (blocks []mdblocks.Block, untested int) {
	t.Helper()
	pages := docPages(t)
	for _, page := range sortedKeys(pages) {
		for _, b := range pages[page] {
			if !slices.Contains(langs, b.Lang) {
				continue
			}
			if _, no := b.NoTest(); no {
				untested++
				continue
			}
			blocks = append(blocks, b)
		}
	}
	return blocks, untested
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

// checkedLangs are the languages a test checks; text, Markdown and no language are output
// and text to copy, shown as they are.
var checkedLangs = []string{"go", "json", "yaml", "yml", "sh", "bash", "shell", "console", "text", "markdown", "md", ""}

// TestDocsBlocksHaveATest: every block is in a language a test checks (or text), or says on
// its fence why it is not checked; the log lists those that say so.
func TestDocsBlocksHaveATest(t *testing.T) {
	pages := docPages(t)
	total, untested := 0, 0
	for _, page := range sortedKeys(pages) {
		for _, b := range pages[page] {
			total++
			if why, no := b.NoTest(); no {
				untested++
				if strings.TrimSpace(why) == "" {
					t.Errorf("%s: {no-test} without a reason: write {no-test: why it cannot be checked}", b.Where())
				}
				t.Logf("not checked: %s: %s", b.Where(), why)
				continue
			}
			if !slices.Contains(checkedLangs, b.Lang) {
				t.Errorf("%s: no test checks %s blocks: use go, json, yaml, sh or text, or say why on the fence: ```%s {no-test: why}",
					b.Where(), b.Lang, b.Lang)
			}
		}
	}
	t.Logf("%d blocks in %d pages, %d marked no-test", total, len(pages), untested)
}

// TestDocsGoBlocks compiles every Go block as a reader would: a file of a module of its own
// that requires Quiver, here replaced by this checkout, one package per block, built together.
// A block is a whole file with its package clause; a program (package main) that ends with
// "// Output:" and the lines it prints is run, and must print them.
func TestDocsGoBlocks(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the pages' programs with the go command")
	}
	blocks, untested := docBlocks(t, "go")
	if len(blocks) == 0 {
		t.Fatal("the pages have no Go block")
	}
	dir := goBlocksModule(t, blocks)
	bin := t.TempDir()
	cmd := exec.Command("go", "build", "-o", bin+string(filepath.Separator), "./...") // go test puts its own go first on PATH
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=readonly")
	if out, err := cmd.CombinedOutput(); err != nil {
		// The compiler names the block's directory (b03/main.go:12:5): say which page that is.
		msg := regexp.MustCompile(`b(\d+)/main\.go`).ReplaceAllStringFunc(string(out), func(s string) string {
			var i int
			fmt.Sscanf(s, "b%d/", &i)
			return blocks[i].Where() + ", block line"
		})
		t.Fatalf("the Go blocks do not build: %v\n%s", err, msg)
	}
	ran := 0
	for i, b := range blocks {
		_, want, ok := strings.Cut(b.Text, outputMarker)
		if !ok || !strings.HasPrefix(b.Text, "package main") && !strings.Contains(b.Text, "\npackage main") {
			continue
		}
		ran++
		t.Run(b.Where(), func(t *testing.T) {
			out, err := exec.Command(filepath.Join(bin, fmt.Sprintf("b%02d", i))).Output()
			if err != nil {
				var stderr []byte
				if ee, ok := err.(*exec.ExitError); ok {
					stderr = ee.Stderr
				}
				t.Fatalf("the program failed: %v\n%s%s\nthe program:\n%s", err, out, stderr, b.Text)
			}
			var lines []string
			for line := range strings.Lines(want) {
				lines = append(lines, strings.TrimPrefix(strings.TrimPrefix(strings.TrimRight(line, "\n"), "//"), " "))
			}
			if got, want := strings.TrimSpace(string(out)), strings.TrimSpace(strings.Join(lines, "\n")); got != want {
				t.Errorf("the program printed:\n%s\nthe page says:\n%s", got, want)
			}
		})
	}
	t.Logf("%d Go blocks built, %d run and their output compared; %d marked no-test", len(blocks), ran, untested)
}

// outputMarker starts a program's closing comment that says what it prints, as in Go's
// examples.
const outputMarker = "// Output:\n"

// goBlocksModule writes a module with each block in a directory of its own (b00, b01...) and
// returns its directory. The module requires what Quiver's does, at the same versions, so that
// it builds from the module cache the repository's own build filled, with no network.
func goBlocksModule(t *testing.T, blocks []mdblocks.Block) string {
	t.Helper()
	goMod, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	goSum, err := os.ReadFile("go.sum")
	if err != nil {
		t.Fatal(err)
	}
	repo, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	_, requires, _ := strings.Cut(string(goMod), "\n")
	// The module's own replacements (the patched go-sdk) point into this checkout.
	requires = strings.ReplaceAll(requires, "=> ./", "=> "+repo+"/")
	dir := t.TempDir()
	files := map[string]string{
		"go.mod": "module example.com/docs\n" + requires + "\nrequire github.com/quiverhq/quiver v0.0.0\n\nreplace github.com/quiverhq/quiver => " + repo + "\n",
		"go.sum": string(goSum),
	}
	for i, b := range blocks {
		if !regexp.MustCompile(`(?m)^package \w+`).MatchString(b.Text) {
			t.Errorf("%s: a Go block is a whole file, from its package clause: write the file, or say why it is not on the fence: ```go {no-test: why}", b.Where())
			continue
		}
		files[fmt.Sprintf("b%02d/main.go", i)] = b.Text
	}
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestDocsJSONBlocks: every JSON block parses, so that what a reader copies into a client's
// file is JSON, without the comments or trailing commas some clients forgive and others
// refuse. A block may hold several values one after the other (alternative request bodies,
// one a line); each must parse.
func TestDocsJSONBlocks(t *testing.T) {
	blocks, untested := docBlocks(t, "json")
	for _, b := range blocks {
		dec := json.NewDecoder(strings.NewReader(b.Text))
		for n := 0; ; n++ {
			var v any
			err := dec.Decode(&v)
			if err == io.EOF && n > 0 {
				break
			}
			if err != nil {
				t.Errorf("%s does not parse: %v\n%s", b.Where(), err, b.Text)
				break
			}
		}
	}
	t.Logf("%d JSON blocks parsed; %d marked no-test", len(blocks), untested)
}

// TestDocsYAMLBlocks: every YAML block is read as what it is, which its fence may say ({config},
// {agent}, {oidc-rules}, {kubernetes}, or {yaml} for YAML that is none of them) and its content
// tells otherwise: a Kubernetes manifest has apiVersion and kind; an agent or prompt definition
// has a name and a system, model or prompt, or a kind of agent or prompt; a file of only rules
// is an identity provider's rules file (--oidc-rules); anything else is a configuration file,
// read as quiver serve reads one (unknown fields refused).
func TestDocsYAMLBlocks(t *testing.T) {
	blocks, untested := docBlocks(t, "yaml", "yml")
	kinds := map[string]int{}
	for _, b := range blocks {
		kind, err := yamlKind(b)
		if err != nil {
			t.Errorf("%s: %v\n%s", b.Where(), err, b.Text)
			continue
		}
		kinds[kind]++
		if err := checkYAML(t, kind, b.Text); err != nil {
			t.Errorf("%s, read as %s: %v\n%s", b.Where(), kind, err, b.Text)
		}
	}
	t.Logf("YAML blocks read: %v; %d marked no-test", kinds, untested)
}

// yamlKinds are the YAML kinds a fence may name.
var yamlKinds = []string{"config", "agent", "oidc-rules", "kubernetes", "yaml"}

// yamlKind is what block is: its fence's word for it, else what its content says.
func yamlKind(b mdblocks.Block) (string, error) {
	for _, k := range yamlKinds {
		if b.Has(k) {
			return k, nil
		}
	}
	var top map[string]any
	if err := yaml.Unmarshal([]byte(b.Text), &top); err != nil {
		return "", fmt.Errorf("not YAML: %v", err)
	}
	_, hasName := top["name"]
	_, hasRules := top["rules"]
	switch {
	case top["apiVersion"] != nil && top["kind"] != nil:
		return "kubernetes", nil
	case top["kind"] == "agent" || top["kind"] == "prompt" || hasName && (top["system"] != nil || top["model"] != nil || top["prompt"] != nil):
		return "agent", nil
	case hasRules && len(top) == 1:
		return "oidc-rules", nil
	case top["subagents"] != nil || top["subprompts"] != nil:
		return "agent", nil // a part of an agent's definition: completed with a name
	}
	return "config", nil
}

// checkYAML reads text as kind.
func checkYAML(t *testing.T, kind, text string) error {
	switch kind {
	case "config":
		_, err := config.Parse(strings.NewReader(text), "the block")
		return err
	case "agent":
		return checkAgentYAML(t, text)
	case "oidc-rules":
		var rf struct {
			Rules []config.ClaimRule `yaml:"rules"`
		}
		dec := yaml.NewDecoder(strings.NewReader(text))
		dec.KnownFields(true)
		if err := dec.Decode(&rf); err != nil {
			return err
		}
		var errs []error
		for _, r := range rf.Rules {
			errs = append(errs, r.Check())
		}
		return errors.Join(errs...)
	case "kubernetes":
		dec := yaml.NewDecoder(strings.NewReader(text))
		for {
			var obj struct {
				APIVersion string `yaml:"apiVersion"`
				Kind       string
				Metadata   struct{ Name string }
			}
			err := dec.Decode(&obj)
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
			if obj.APIVersion == "" || obj.Kind == "" || obj.Metadata.Name == "" {
				return fmt.Errorf("a Kubernetes object needs apiVersion, kind and metadata.name, got %+v", obj)
			}
		}
	}
	var v any
	return yaml.Unmarshal([]byte(text), &v)
}

// checkAgentYAML loads text as a definition file; a part of a definition (subagents, say)
// gets a name, and the agents and prompts it names are defined beside it, so that what is
// checked is the part itself.
func checkAgentYAML(t *testing.T, text string) error {
	dir := t.TempDir()
	var top map[string]any
	if err := yaml.Unmarshal([]byte(text), &top); err != nil {
		return err
	}
	if _, ok := top["name"]; !ok {
		text = "name: example\nsystem: An example.\n" + text
	}
	def := filepath.Join(dir, "example.yaml")
	if err := os.WriteFile(def, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := agent.LoadFile(def)
	named := namedDefinitions(top)
	if err == nil || len(named) == 0 {
		return err
	}
	// Agents and prompts the block names but does not define: define them beside it, taking
	// the arguments it gives them, and load the directory.
	for _, d := range named {
		body, _ := json.Marshal(d)
		if err := os.WriteFile(filepath.Join(dir, d["kind"].(string)+"-"+d["name"].(string)+".json"), body, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	_, err = agent.LoadDir(dir)
	return err
}

// namedDefinitions are the agents and prompts a definition names (its prompt, sides,
// sub-agents and sub-prompts) as definitions that take the init properties it gives them.
func namedDefinitions(top map[string]any) []map[string]any {
	var out []map[string]any
	for _, key := range []string{"prompt", "side_a", "side_b"} {
		if name, ok := top[key].(string); ok {
			out = append(out, map[string]any{"kind": "prompt", "name": name, "system": "An example."})
		}
	}
	for key, kind := range map[string]string{"subagents": "agent", "subprompts": "prompt"} {
		list, _ := top[key].([]any)
		for _, item := range list {
			m, ok := item.(map[string]any)
			name, _ := m["name"].(string)
			if !ok || name == "" {
				continue
			}
			props := map[string]any{}
			for prop, schema := range map[string]any{"init_user_message_property": map[string]any{"type": "string"},
				"init_attachments_property": map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
				"init_agent_name_property":  map[string]any{"type": "string"}} {
				if arg, ok := m[prop].(string); ok {
					props[arg] = schema
				}
			}
			def := map[string]any{"kind": kind, "name": name, "system": "An example.", "expose_as_tool": true,
				"args": map[string]any{"type": "object", "properties": props}}
			if kind == "agent" {
				def["type"] = "dual_ai"
				delete(def, "expose_as_tool")
			}
			out = append(out, def)
		}
	}
	return out
}

// TestKubernetesServiceNoAffinity: the manifest's Service spreads requests over every node, as
// docs/DEPLOY.md says it may: any node continues any MCP session, event stream or run, since
// they live in the database. An affinity put back "because sessions live on one node" would
// hide a node that cannot continue them (TestFleetMCPSessionsContinueOnEveryNode shows they
// can), and pin clients to a node that drains.
func TestKubernetesServiceNoAffinity(t *testing.T) {
	const manifest = "deploy/kubernetes/quiver.yaml"
	data, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkYAML(t, "kubernetes", string(data)); err != nil {
		t.Fatalf("%s: %v", manifest, err)
	}
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	services := 0
	for {
		var obj struct {
			Kind     string
			Metadata struct{ Name string }
			Spec     map[string]any
		}
		err := dec.Decode(&obj)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", manifest, err)
		}
		if obj.Kind != "Service" {
			continue
		}
		services++
		// Kubernetes' default is None; ClientIP pins each client to one node.
		if a, set := obj.Spec["sessionAffinity"]; set && a != "None" {
			t.Errorf("%s: the Service %s sets sessionAffinity: %v; the nodes need none (docs/DEPLOY.md, What every node must be given)", manifest, obj.Metadata.Name, a)
		}
		if _, set := obj.Spec["sessionAffinityConfig"]; set {
			t.Errorf("%s: the Service %s sets sessionAffinityConfig; the nodes need no affinity", manifest, obj.Metadata.Name)
		}
	}
	if services == 0 {
		t.Fatalf("%s has no Service: the test checks nothing", manifest)
	}
}
