package schema

import (
	"encoding/json"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// hostileNames are names that collide once sanitized, or that a provider rejects for their
// length, script or punctuation (seed 003 §8.3: such names are accepted with a warning, so
// every dialect must give each a valid, distinct name that maps back).
func hostileNames() []string {
	long := strings.Repeat("x", 64)
	names := []string{
		"a b", "a_b", "a-b", "a/b", "a.b", "a:b", "a?b", "a%b", "a  b", "a__b",
		"look up: weather?", "look_up__weather_", "look up weather",
		"名前", "名後", "天気", "café", "cafe", "caf_", "😀", "😁", "ß", "ss",
		"../../evil", "..", ".", "/", "_", "-", "9starts", "_9starts", ".hidden", "-dash",
		"get_weather", "GetWeather", "everything.echo", "ns:tool", "github/create_issue",
		" padded ", "trailing space ", `back\slash`, `quote"d`, "tab", "<script>",
		long + strings.Repeat("y", 236), long + strings.Repeat("z", 236), long + "y" + strings.Repeat("z", 235),
		strings.Repeat("名", 100), strings.Repeat("名", 101), strings.Repeat("a", 128), strings.Repeat("a", 129),
		strings.Repeat("b", 64), strings.Repeat("b", 65), strings.Repeat("b", 512),
	}
	return names
}

// checkNameMapping renders names in d and checks what every dialect must hold: the wire form
// passes the provider's own checks (valid, distinct names), every canonical name maps out and
// back (Inbound(Outbound(n)) == n), and the mapping depends on the set alone (the reversed
// order, and shuffled orders, map every name the same way).
func checkNameMapping(t *testing.T, d Dialect, names []string, rng *rand.Rand) map[string]string {
	t.Helper()
	render := func(order []string) (*ToolSet, map[string]string) {
		tools := make([]ToolSchema, len(order))
		for i, n := range order {
			tools[i] = ToolSchema{Name: n, Description: "d"} // names are what is checked here
		}
		ts, err := Render(d, tools)
		if err != nil {
			t.Fatalf("%s: Render: %v", d, err)
		}
		m := make(map[string]string, len(order))
		for _, rt := range ts.Tools {
			m[rt.Canonical] = rt.Name
		}
		return ts, m
	}
	ts, want := render(names)
	wire, err := json.Marshal(ts)
	if err != nil {
		t.Fatalf("%s: marshal: %v", d, err)
	}
	for _, e := range checkers[d](wire) {
		t.Errorf("%s: %v", d, e)
	}
	seen := map[string]string{}
	for i, rt := range ts.Tools {
		n := names[i]
		if rt.Canonical != n {
			t.Errorf("%s: tool %d: Canonical %q, want %q", d, i, rt.Canonical, n)
		}
		if prev, dup := seen[rt.Name]; dup {
			t.Errorf("%s: %q and %q are both offered as %q", d, prev, n, rt.Name)
		}
		seen[rt.Name] = n
		out := ts.Outbound(n)
		if out != rt.Name {
			t.Errorf("%s: Outbound(%q) = %q, want %q", d, n, out, rt.Name)
		}
		got, args, ok := ts.Inbound(out, []byte(`{}`))
		if !ok || got != n || string(args) != `{}` {
			t.Errorf("%s: Inbound(Outbound(%q)) = %q, %s, %v", d, n, got, args, ok)
		}
		if rule := rules[d]; rule.valid(n) && rt.Name != n {
			t.Errorf("%s: %q, a name the provider accepts, was mapped to %q", d, n, rt.Name)
		}
	}
	orders := [][]string{slices.Clone(names)}
	slices.Reverse(orders[0])
	for range 3 {
		o := slices.Clone(names)
		rng.Shuffle(len(o), func(i, j int) { o[i], o[j] = o[j], o[i] })
		orders = append(orders, o)
	}
	for _, o := range orders {
		if _, got := render(o); !maps(got, want) {
			t.Errorf("%s: the mapping depends on the order of the tools:\n%v\n%v", d, want, got)
			break
		}
	}
	return want
}

var rules = map[Dialect]nameRule{OpenAI: ruleOpenAI, OpenAIStrict: ruleOpenAI, Anthropic: ruleOpenAI, Gemini: ruleGemini, MCP: ruleMCP}

func maps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// Names that collide after sanitising ("a b", "a_b", "a-b", "a/b", "a.b"), names in other
// scripts, and long names that share a prefix longer than a provider's limit all get distinct
// valid names in every dialect, the same whatever the order of the tools, and map back.
func TestRenderHostileNamesEveryDialect(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	names := hostileNames()
	for _, d := range Dialects {
		t.Run(string(d), func(t *testing.T) {
			m := checkNameMapping(t, d, names, rng)
			// A name the provider rejects is offered a readable form of it where that is free.
			for canonical, want := range map[string]string{"天気": "__", "😀": "_"} {
				if got := m[canonical]; !strings.HasPrefix(got, want) {
					t.Errorf("%q offered as %q, want it to start with %q", canonical, got, want)
				}
			}
			if got := m[strings.Repeat("b", 512)]; !strings.HasPrefix(got, strings.Repeat("b", 40)) {
				t.Errorf("a long name offered as %q, want its prefix kept", got)
			}
		})
	}
}

// The same set maps the same way in another process: the provider names are a function of the
// names alone (a hash, not a random or per-process value). Pinned here so that a change to the
// mapping, which would rename the tools of runs in flight, is a deliberate one.
func TestRenderNameMappingIsPinned(t *testing.T) {
	ts, err := Render(OpenAI, []ToolSchema{
		{Name: "a b", Description: "d"}, {Name: "a.b", Description: "d"}, {Name: "a_b", Description: "d"},
		{Name: "look up: weather?", Description: "d"}, {Name: "天気", Description: "d"},
	})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, rt := range ts.Tools {
		got[rt.Canonical] = rt.Name
	}
	want := map[string]string{
		"a_b":               "a_b",
		"a b":               "a_b_ef5ddc5d",
		"a.b":               "a_b_d73b2453",
		"look up: weather?": "look_up__weather_",
		"天気":                "__",
	}
	if !maps(got, want) {
		t.Errorf("got %v, want %v: the mapping changed, and with it the names of tools in runs in flight", got, want)
	}
}

// A name whose suffixed form is taken (here by a name that conforms and is spelled so on
// purpose) gets the next suffix: collisions of suffixes, rare or contrived, resolve too.
func TestRenderNameSuffixCollision(t *testing.T) {
	taken := "a_b_" + nameSuffix("a b", 0)
	for _, d := range Dialects {
		m := checkNameMapping(t, d, []string{"a b", "a.b", "a/b", taken}, rand.New(rand.NewPCG(3, 4)))
		if m[taken] != taken {
			t.Errorf("%s: %q, which conforms, was renamed %q", d, taken, m[taken])
		}
		if m["a b"] == taken || m["a b"] == "" {
			t.Errorf("%s: a b offered as %q", d, m["a b"])
		}
	}
}

// A property check over many random sets of hostile names: names built from the characters
// that sanitize alike, other scripts and shared long prefixes.
func TestRenderRandomHostileNames(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	alphabet := []string{"a", "b", "_", "-", ".", "/", " ", ":", "?", "%", "é", "名", "😀", "0", "9", "A"}
	prefixes := []string{"", strings.Repeat("p", 60), strings.Repeat("q_", 40), strings.Repeat("名", 30)}
	iterations := 100
	if testing.Short() {
		iterations = 20
	}
	for it := range iterations {
		set := map[string]bool{}
		n := 1 + rng.IntN(30)
		for len(set) < n {
			var b strings.Builder
			b.WriteString(prefixes[rng.IntN(len(prefixes))])
			for range 1 + rng.IntN(12) {
				b.WriteString(alphabet[rng.IntN(len(alphabet))])
			}
			if rng.IntN(8) == 0 {
				b.WriteString(strings.Repeat("z", rng.IntN(300)))
			}
			set[b.String()] = true
		}
		names := make([]string, 0, len(set))
		for s := range set {
			names = append(names, s)
		}
		slices.Sort(names)
		for _, d := range Dialects {
			checkNameMapping(t, d, names, rng)
		}
		if t.Failed() {
			t.Fatalf("set %d: %q", it, names)
		}
	}
}

// FuzzRenderNames checks the same properties over names the fuzzer makes: a newline separates
// the names of one set.
func FuzzRenderNames(f *testing.F) {
	f.Add("a b\na_b\na-b\na/b\na.b")
	f.Add("名前\n名後\n天気")
	f.Add(strings.Repeat("x", 300) + "\n" + strings.Repeat("x", 299) + "?")
	f.Add("\xff\xfe\na\x00b\n")
	f.Fuzz(func(t *testing.T, s string) {
		var names []string
		seen := map[string]bool{}
		for _, n := range strings.Split(s, "\n") {
			if !seen[n] && len(names) < 64 {
				seen[n] = true
				names = append(names, n)
			}
		}
		rng := rand.New(rand.NewPCG(7, 8))
		for _, d := range Dialects {
			checkNameMapping(t, d, names, rng)
		}
	})
}

// A name every model provider accepts (CheckProviderName) is one each model dialect's rule
// accepts as given, and the names it refuses are refused with what is allowed.
func TestCheckProviderName(t *testing.T) {
	cases := []struct {
		name string
		ok   bool
	}{
		{"issue_refund", true}, {"_private", true}, {"Refund-2", true}, {"a", true}, {strings.Repeat("a", 64), true},
		{"", false}, {strings.Repeat("a", 65), false}, {"9lives", false}, {"-dash", false}, {"payments.refund", false},
		{"ns:tool", false}, {"look up", false}, {"café", false}, {"名前", false},
	}
	for _, c := range cases {
		err := CheckProviderName(c.name)
		if (err == nil) != c.ok {
			t.Errorf("CheckProviderName(%q) = %v, want ok %v", c.name, err, c.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "give 1 to 64 characters of letters (a-z, A-Z), digits, _ and -, starting with a letter or _") {
			t.Errorf("CheckProviderName(%q) = %v: it does not say what is allowed", c.name, err)
		}
	}
	for _, n := range append(hostileNames(), "issue_refund", "_x", "A-1") {
		if CheckProviderName(n) != nil {
			continue
		}
		for _, d := range []Dialect{OpenAI, OpenAIStrict, Anthropic, Gemini, MCP} {
			if !rules[d].valid(n) {
				t.Errorf("%q passes CheckProviderName, but %s rejects it", n, d)
			}
		}
	}
}

// A tool given a provider name (ToolSchema.ProviderName) is offered under it as given in every
// model dialect, not in MCP's, whatever the order of the tools, and a call of it maps back; a
// provider name the dialect rejects or that another tool is offered under is an error, never a
// silent rename of either tool.
func TestRenderProviderNames(t *testing.T) {
	type tool struct{ name, provider string }
	cases := []struct {
		name    string
		tools   []tool
		dialect Dialect
		want    map[string]string // canonical -> offered
		wantErr string
	}{
		{"as given", []tool{{"payments.createRefund", "issue_refund"}, {"a b", ""}}, OpenAI,
			map[string]string{"payments.createRefund": "issue_refund", "a b": "a_b"}, ""},
		{"as given in Gemini", []tool{{"payments.createRefund", "issue_refund"}, {"ns:tool", ""}}, Gemini,
			map[string]string{"payments.createRefund": "issue_refund", "ns:tool": "ns:tool"}, ""},
		{"MCP ignores it", []tool{{"payments.createRefund", "issue_refund"}}, MCP,
			map[string]string{"payments.createRefund": "payments.createRefund"}, ""},
		{"a swap", []tool{{"a", "b"}, {"b", "a"}}, Anthropic, map[string]string{"a": "b", "b": "a"}, ""},
		{"the freed name of a renamed tool", []tool{{"a.b", "ab"}, {"a b", ""}}, OpenAI,
			map[string]string{"a.b": "ab", "a b": "a_b"}, ""},
		{"a name the dialect rejects", []tool{{"x", "payments.refund"}}, OpenAI, nil,
			`schema: tool "x": the provider name "payments.refund" is not a name this provider accepts`},
		{"one name for two tools", []tool{{"x", "same"}, {"y", "same"}}, OpenAIStrict, nil,
			`schema: tools "x" and "y" are both given the provider name "same"`},
		{"another tool's own name", []tool{{"payments.createRefund", "weather"}, {"weather", ""}}, Gemini, nil,
			`schema: the provider name "weather" given to tool "payments.createRefund" collides with tool "weather", offered as "weather": give "payments.createRefund" another provider name`},
		{"another tool's mapped name", []tool{{"weather", "a_b"}, {"a.b", ""}}, OpenAI, nil,
			`the provider name "a_b" given to tool "weather" collides with tool "a.b", offered as "a_b"`},
		{"the same where it needs no mapping", []tool{{"weather", "a_b"}, {"a.b", ""}}, Gemini,
			map[string]string{"weather": "a_b", "a.b": "a.b"}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tools := make([]ToolSchema, len(c.tools))
			for i, tl := range c.tools {
				tools[i] = ToolSchema{Name: tl.name, Description: "d", ProviderName: tl.provider}
			}
			reversed := slices.Clone(tools)
			slices.Reverse(reversed)
			for _, order := range [][]ToolSchema{tools, reversed} {
				ts, err := Render(c.dialect, order)
				if c.wantErr != "" {
					if err == nil || !strings.Contains(err.Error(), c.wantErr) {
						t.Fatalf("err = %v; want it to say %q", err, c.wantErr)
					}
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				for canonical, want := range c.want {
					if got := ts.Outbound(canonical); got != want {
						t.Errorf("%q offered as %q, want %q", canonical, got, want)
					}
					if got, _, ok := ts.Inbound(want, []byte(`{}`)); !ok || got != canonical {
						t.Errorf("Inbound(%q) = %q, %v; want %q", want, got, ok, canonical)
					}
				}
			}
		})
	}
}
