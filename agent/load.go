package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/schema"
)

// Catalog holds the prompts and agents of a directory of definitions.
type Catalog struct {
	Prompts map[string]*Prompt
	Agents  map[string]*Agent
	// Skipped names the files of a directory that LoadDir did not read as definitions
	// because none of their fields is a definition's (a scripted model's script kept beside
	// its agent, say), so that a caller can say so.
	Skipped []string
}

// Agent returns the agent called name.
func (c *Catalog) Agent(name string) (*Agent, bool) {
	a, ok := c.Agents[name]
	return a, ok
}

// Names lists the agents, sorted.
func (c *Catalog) Names() []string {
	var out []string
	for n := range c.Agents {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// definition is one YAML (or JSON) file: a prompt (kind: prompt) or an agent (kind: agent, the
// default) whose prompt is written inline or named with prompt: NAME.
type definition struct {
	Kind        string `json:"kind"`
	Name        string `json:"name"`
	Description string `json:"description"`
	Prompt      string `json:"prompt"` // an agent's prompt, by name
	System      string `json:"system"`
	Model       string `json:"model"`
	// Tools is a list of tool names or patterns, or seed 001's {allow: [...], deny: [...]}.
	Tools     toolsField       `json:"tools"`
	Allow     []string         `json:"allow"`
	Deny      []string         `json:"deny"`
	Variables quiver.Variables `json:"variables"`
	// Tenvs is the older name of variables, as a list or a tenvs object schema.
	Tenvs  quiver.Variables `json:"tenvs"`
	Output json.RawMessage  `json:"output"`
	Stop   StopRules        `json:"stop"`
	Strict bool             `json:"strict"`
	// ReasoningForCall and MaxCallsPerStep: see Prompt.
	ReasoningForCall bool     `json:"reasoning_for_call"`
	MaxCallsPerStep  int      `json:"max_calls_per_step"`
	Temperature      *float64 `json:"temperature"`
	MaxTokens        int      `json:"max_tokens"`
	// Nested prompts and agents (see Prompt and Agent).
	Type         AgentType       `json:"type"`
	ExposeAsTool bool            `json:"expose_as_tool"`
	Args         json.RawMessage `json:"args"`
	Subprompts   []Subprompt     `json:"subprompts"`
	Subagents    []Subagent      `json:"subagents"`
	// Stateful calls (see Prompt).
	MetaFields []string `json:"meta_fields"`
	Instances  []string `json:"instances"`

	// UntrustedToolOutput: see Prompt.
	UntrustedToolOutput bool `json:"untrusted_tool_output"`

	// A two-sided dual-AI agent names its sides' prompts (side_a is the same as prompt) and
	// the rules of their turns (see Agent.SideB, Conversation).
	SideA        string       `json:"side_a"`
	SideB        string       `json:"side_b"`
	Conversation Conversation `json:"conversation"`
}

// promptRefs are the prompts an agent names, which link resolves once every file is read.
type promptRefs struct{ prompt, sideB string }

const fieldList = "kind, name, description, prompt, system, model, tools (a list, or {allow, deny}), allow, deny, variables (or tenvs), output, stop " +
	"(no_calls, on_output, max_steps, tools), strict, reasoning_for_call, max_calls_per_step, untrusted_tool_output, temperature, max_tokens, " +
	"type (ai_human, dual_ai), expose_as_tool, args, subprompts, subagents, meta_fields, instances, " +
	"side_a, side_b, conversation (max_turns, until, answer); " +
	"each in snake_case or camelCase (expose_as_tool or exposeAsTool)"

// LoadFile reads one definition file (.yaml, .yml or .json) into a catalog.
func LoadFile(path string) (*Catalog, error) {
	c := &Catalog{Prompts: map[string]*Prompt{}, Agents: map[string]*Agent{}}
	refs := map[string]promptRefs{}
	if err := c.load(path, refs); err != nil {
		return nil, err
	}
	return c, c.link(refs)
}

// LoadDir reads every .yaml, .yml and .json file of dir (not its subdirectories) into a
// catalog. Names are unique across the directory; an agent's prompt: NAME must name a prompt
// defined there. A file none of whose fields is a definition's (kind, name, system, ...) is not
// a definition: it is left out and listed in Catalog.Skipped. Any other file that is not a valid definition is an
// error naming the file and what is wrong.
func LoadDir(dir string) (*Catalog, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("agent: reading definitions: %w", err)
	}
	c := &Catalog{Prompts: map[string]*Prompt{}, Agents: map[string]*Agent{}}
	refs := map[string]promptRefs{}
	for _, e := range entries {
		if e.IsDir() || !isDefinitionFile(e.Name()) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		if err := c.load(path, refs); errors.Is(err, errNotDefinition) {
			c.Skipped = append(c.Skipped, path)
		} else if err != nil {
			return nil, err
		}
	}
	return c, c.link(refs)
}

// errNotDefinition is load's answer for a mapping none of whose fields is a definition's.
var errNotDefinition = errors.New("has none of the fields of a definition: not an agent or prompt definition")

// isDefinitionField reports whether key is a field of a definition (see fieldList).
func isDefinitionField(key string) bool {
	return definitionFields[key]
}

var definitionFields = func() map[string]bool {
	m := map[string]bool{}
	t := reflect.TypeFor[definition]()
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		m[name] = true
	}
	return m
}()

func isDefinitionFile(name string) bool {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// maxDefinitionBytes bounds a definition file: definitions are hand-written text.
const maxDefinitionBytes = 1 << 20

func (c *Catalog) load(path string, refs map[string]promptRefs) error {
	raw, err := readDefinitionFile(path)
	if err != nil {
		return err
	}
	return c.loadRaw(path, raw, refs)
}

// loadRaw adds the definition raw holds to the catalog; path names it in errors.
func (c *Catalog) loadRaw(path string, raw []byte, refs map[string]promptRefs) error {
	def, err := parseDefinition(raw)
	if errors.Is(err, errNotDefinition) {
		return fmt.Errorf("%w: %s: %w", ErrDefinition, path, err)
	}
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrDefinition, path, err)
	}
	p, err := def.prompt()
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrDefinition, path, err)
	}
	switch def.Kind {
	case "prompt":
		return c.addPrompt(path, def, p)
	case "", "agent":
		return c.addAgent(path, def, p, refs)
	}
	return fmt.Errorf("%w: %s: kind %q: want agent or prompt", ErrDefinition, path, def.Kind)
}

// readDefinitionFile reads the definition file at path, within maxDefinitionBytes.
func readDefinitionFile(path string) ([]byte, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	if info.Size() > maxDefinitionBytes {
		return nil, fmt.Errorf("%w: %s is %d bytes, over the %d byte limit", ErrDefinition, path, info.Size(), maxDefinitionBytes)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	return raw, nil
}

// prompt is the prompt a definition defines (an agent's own, or a prompt), its argument and
// output schemas compiled.
func (def *definition) prompt() (*Prompt, error) {
	tools, allow, deny, err := def.policyFields()
	if err != nil {
		return nil, err
	}
	p := &Prompt{Name: def.Name, Description: def.Description, System: def.System, Model: def.Model, Tools: tools,
		Allow: allow, Deny: deny, Variables: def.Variables, Stop: def.Stop, Strict: def.Strict,
		ReasoningForCall: def.ReasoningForCall, MaxCallsPerStep: def.MaxCallsPerStep, UntrustedToolOutput: def.UntrustedToolOutput,
		Temperature: def.Temperature, MaxTokens: def.MaxTokens, Subprompts: def.Subprompts, Subagents: def.Subagents,
		MetaFields: def.MetaFields, Instances: def.Instances}
	if p.Args, err = definedSchema("args", def.Args); err != nil {
		return nil, err
	}
	if p.Args != nil && p.Args.Type != "object" {
		return nil, errors.New("args: the argument schema must be an object schema (type: object)")
	}
	if p.Output, err = definedSchema("output", def.Output); err != nil {
		return nil, err
	}
	return p, nil
}

// definedSchema is the JSON Schema a definition gives for field, compiled; nil when none.
func definedSchema(field string, raw json.RawMessage) (*schema.Schema, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	s := new(schema.Schema)
	if err := json.Unmarshal(raw, s); err != nil {
		return nil, fmt.Errorf("%s: %v", field, err)
	}
	if _, err := schema.Compile(s); err != nil {
		return nil, fmt.Errorf("%s: %v", field, err)
	}
	return s, nil
}

// addPrompt adds a prompt's definition to the catalog.
func (c *Catalog) addPrompt(path string, def *definition, p *Prompt) error {
	p.ExposeAsTool = def.ExposeAsTool
	if def.Type != "" {
		return fmt.Errorf("%w: %s: type belongs to agents, not prompts", ErrDefinition, path)
	}
	if def.Prompt != "" {
		return fmt.Errorf("%w: %s: a prompt cannot name another prompt (prompt: %s)", ErrDefinition, path, def.Prompt)
	}
	if err := p.Check(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if _, dup := c.Prompts[p.Name]; dup {
		return fmt.Errorf("%w: %s: a second prompt named %q", ErrDefinition, path, p.Name)
	}
	c.Prompts[p.Name] = p
	return nil
}

// addAgent adds an agent's definition to the catalog: with a prompt of its own (p), or naming
// one, and for a two-sided agent side_b's too (refs records them, for link).
func (c *Catalog) addAgent(path string, def *definition, p *Prompt, refs map[string]promptRefs) error {
	a := &Agent{Name: def.Name, Description: def.Description, Type: def.Type, ExposeAsTool: def.ExposeAsTool, Conversation: def.Conversation}
	named, err := def.namedPrompt(path)
	if err != nil {
		return err
	}
	if named != "" {
		refs[a.Name] = promptRefs{prompt: named, sideB: def.SideB}
	} else {
		a.Prompt = p
		if err := a.Check(); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	if a.Name == "" {
		return fmt.Errorf("%w: %s: an agent needs a name", ErrDefinition, path)
	}
	if _, dup := c.Agents[a.Name]; dup {
		return fmt.Errorf("%w: %s: a second agent named %q", ErrDefinition, path, a.Name)
	}
	c.Agents[a.Name] = a
	return nil
}

// namedPrompt is the prompt an agent's definition names (its side_a's, for a two-sided
// agent), "" when it defines its own; naming one and defining prompt fields too is an error.
func (def *definition) namedPrompt(path string) (string, error) {
	named := def.Prompt
	if def.SideA != "" {
		if def.Prompt != "" && def.Prompt != def.SideA {
			return "", fmt.Errorf("%w: %s: agent %s names prompt %q and side_a %q: side_a is its prompt, name it once",
				ErrDefinition, path, def.Name, def.Prompt, def.SideA)
		}
		named = def.SideA
	}
	if def.SideB != "" && named == "" {
		return "", fmt.Errorf("%w: %s: agent %s names side_b %q but not side_a: a two-sided agent names both prompts (side_a, side_b)",
			ErrDefinition, path, def.Name, def.SideB)
	}
	if named != "" && def.hasPromptFields() {
		return "", fmt.Errorf("%w: %s: agent %s names prompt %q and also defines prompt fields: do one or the other",
			ErrDefinition, path, def.Name, named)
	}
	return named, nil
}

// hasPromptFields reports whether a definition defines a prompt's fields.
func (def *definition) hasPromptFields() bool {
	return def.System != "" || def.Tools.given() || def.Model != "" || len(def.Output) > 0 || len(def.Args) > 0 ||
		def.Subprompts != nil || def.Subagents != nil
}

// link resolves the agents that name their prompt.
func (c *Catalog) link(refs map[string]promptRefs) error {
	for agentName, ref := range refs {
		p, ok := c.Prompts[ref.prompt]
		if !ok {
			return fmt.Errorf("%w: agent %s names prompt %q, which is not defined (prompts: %v)", ErrDefinition,
				agentName, ref.prompt, keys(c.Prompts))
		}
		c.Agents[agentName].Prompt = p
		if ref.sideB == "" {
			continue
		}
		if c.Agents[agentName].SideB, ok = c.Prompts[ref.sideB]; !ok {
			return fmt.Errorf("%w: agent %s names side_b %q, which is not a prompt defined here (prompts: %v)", ErrDefinition,
				agentName, ref.sideB, keys(c.Prompts))
		}
	}
	for _, a := range c.Agents {
		if err := a.Check(); err != nil {
			return err
		}
	}
	return c.checkNested()
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// parseDefinition reads YAML (JSON is YAML) through JSON, so that the JSON Schema of output
// and the variables keep their JSON meaning, and unknown fields are refused by name.
func parseDefinition(raw []byte) (*definition, error) {
	var doc any
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil, err
	}
	if doc == nil {
		return nil, errors.New("the file is empty")
	}
	fields, ok := doc.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("want a mapping of fields (%s), got %T", fieldList, doc)
	}
	if err := canonicalKeys(doc, reflect.TypeFor[definition](), ""); err != nil {
		return nil, err
	}
	if !slices.ContainsFunc(slices.Collect(maps.Keys(fields)), isDefinitionField) {
		return nil, errNotDefinition
	}
	js, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("not representable as JSON: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	var def definition
	if err := dec.Decode(&def); err != nil {
		return nil, fmt.Errorf("%v (fields: %s)", err, fieldList)
	}
	if err := def.mergeTenvs(); err != nil {
		return nil, err
	}
	return &def, nil
}

// mergeTenvs declares the variables a definition gives as tenvs (their older name) with its
// variables.
func (def *definition) mergeTenvs() error {
	for _, t := range def.Tenvs {
		if slices.ContainsFunc(def.Variables, func(v quiver.Variable) bool { return v.Name == t.Name }) {
			return fmt.Errorf("variable %s is declared in both variables and tenvs; declare it once", t.Name)
		}
	}
	if len(def.Tenvs) > 0 {
		def.Variables = append(def.Variables, def.Tenvs...)
		def.Tenvs = nil
	}
	return nil
}
