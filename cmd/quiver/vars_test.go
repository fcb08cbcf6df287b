package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/quiverhq/quiver/store/postgres"
	"github.com/quiverhq/quiver/store/postgres/pgtest"
)

// buildQuiver builds the command once per test binary, into the tests' folder.
var buildQuiver = sync.OnceValues(func() (string, error) {
	goTool := "go" // go test puts its own go first on PATH
	bin := filepath.Join(testRoot, "bin", "quiver")
	if out, err := exec.Command(goTool, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
})

func quiverBinary(t testing.TB) string {
	t.Helper()
	bin, err := buildQuiver()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// vaultJS proves the tool saw the secret without revealing it: it returns a hash of the value
// (FNV-1a, 32 bits) and, carelessly, the value itself, which masking must hide.
const vaultJS = `export default (args, state) => {
	const token = state.env("VAULT_TOKEN");
	let h = 0x811c9dc5;
	for (let i = 0; i < token.length; i++) { h ^= token.charCodeAt(i); h = Math.imul(h, 0x01000193) >>> 0; }
	return { hash: h >>> 0, echo: token, region: state.env("REGION") ?? null };
}`

const vaultSchema = `{"type": "object", "description": "Opens the vault and says which region it is in.",
	"properties": {"_tool": {"const": "vault_probe"}},
	"variables": [{"name": "VAULT_TOKEN", "type": "secret", "required": true, "description": "the vault's token"},
		{"name": "REGION", "type": "text"}]}`

func fnv32a(s string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(s))
	return h.Sum32()
}

// vaultValue is the structured value of a vault_probe result.
type vaultValue struct {
	Hash   uint32 `json:"hash"`
	Echo   string `json:"echo"`
	Region any    `json:"region"`
}

// binRunner runs the built command with the test's environment.
type binRunner struct {
	t   *testing.T
	bin string
	env []string
}

func (b binRunner) run(stdin string, args ...string) (int, string, string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, b.bin, args...)
	cmd.Env = b.env
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	code := exitCode(b.t, cmd.Run())
	return code, stdout.String(), stderr.String()
}

// exitCode is the exit status of a command that ran, from what its Run or Output returned; a
// command that could not run fails the test.
func exitCode(t testing.TB, err error) int {
	t.Helper()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0
}

// childEnv is the environment of the commands the test starts: the test's own data directory,
// and nothing that points at another deployment or carries a key.
func childEnv(dataDir string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "QUIVER_") || k == "XDG_DATA_HOME" {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "XDG_DATA_HOME="+dataDir)
}

// V2-V4, MCP1 end to end with the built binary: a secret set with quiver vars set reaches a
// JavaScript tool through quiver call, quiver serve over MCP and quiver mcp stdio; the tool
// sees the value, and the value appears in no output, no log and no file of the database.
func TestVariablesAtEveryDoor(t *testing.T) {
	bin := quiverBinary(t)
	data := t.TempDir()
	dir := writeFiles(t, map[string]string{"vault.js": vaultJS, "vault.json": vaultSchema})
	db := filepath.Join(data, "quiver", "quiver.db")
	q := binRunner{t: t, bin: bin, env: childEnv(data)}
	secretValue := "qvs-" + strings.ToLower(rand.Text())
	want := fnv32a(secretValue)
	var outputs []string // everything the commands printed
	run := func(stdin string, args ...string) (int, string, string) {
		t.Helper()
		code, stdout, stderr := q.run(stdin, args...)
		outputs = append(outputs, stdout, stderr)
		return code, stdout, stderr
	}

	if code, _, stderr := run("", "tools", "add", "--js", filepath.Join(dir, "vault.js"), "--schema", filepath.Join(dir, "vault.json")); code != exitOK {
		t.Fatalf("tools add: %s", stderr)
	}
	// Before the secret is set: a missing_variable result, and a hint that says how to set it.
	code, stdout, stderr := run("", "call", "vault_probe")
	if code != exitError || !strings.Contains(stdout, `"code": "missing_variable"`) || !strings.Contains(stdout, "VAULT_TOKEN") ||
		!strings.Contains(stderr, "quiver vars set") {
		t.Fatalf("call before the secret is set: exit %d\n%s\n%s", code, stdout, stderr)
	}
	// A secret is never taken from the command line.
	if code, _, stderr := run("", "vars", "set", "VAULT_TOKEN", "on-the-command-line", "--secret"); code != exitUsage ||
		!strings.Contains(stderr, "standard input") {
		t.Fatalf("a secret on the command line: exit %d\n%s", code, stderr)
	}
	if code, stdout, stderr := run(secretValue+"\n", "vars", "set", "VAULT_TOKEN", "--secret"); code != exitOK ||
		!strings.Contains(stdout, "set VAULT_TOKEN (secret) on the instance") {
		t.Fatalf("vars set --secret: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if code, _, stderr := run("", "vars", "set", "REGION", "eu-west"); code != exitOK {
		t.Fatalf("vars set REGION: %s", stderr)
	}
	code, stdout, _ = run("", "vars", "list")
	if code != exitOK || !regexp.MustCompile(`VAULT_TOKEN\s+\(secret, set\)`).MatchString(stdout) ||
		!regexp.MustCompile(`REGION\s+eu-west`).MatchString(stdout) {
		t.Fatalf("vars list: exit %d\n%s", code, stdout)
	}

	check := func(door string, value json.RawMessage) {
		t.Helper()
		var v vaultValue
		if err := json.Unmarshal(value, &v); err != nil {
			t.Fatalf("%s: result value %s: %v", door, value, err)
		}
		if v.Hash != want || v.Region != "eu-west" {
			t.Errorf("%s: the tool saw hash %d and region %v; want %d (the secret's) and eu-west", door, v.Hash, v.Region, want)
		}
		if v.Echo != "[REDACTED]" {
			t.Errorf("%s: the echoed secret came back as %q, want it masked", door, v.Echo)
		}
	}

	// quiver call.
	code, stdout, stderr = run("", "call", "vault_probe")
	if code != exitOK {
		t.Fatalf("call: exit %d\n%s\n%s", code, stdout, stderr)
	}
	var res struct {
		Value json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("call printed %s", stdout)
	}
	check("quiver call", res.Value)

	// quiver serve, over MCP.
	serve := exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--insecure-local")
	serve.Env = q.env
	serveErr := &syncBuffer{}
	serve.Stderr = serveErr
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	endpoint := ""
	for deadline := time.Now().Add(30 * time.Second); endpoint == "" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if m := servingRE.FindStringSubmatch(serveErr.String()); m != nil {
			endpoint = m[1]
		}
	}
	if endpoint == "" {
		serve.Process.Kill()
		serve.Wait()
		t.Fatalf("quiver serve did not start:\n%s", serveErr.String())
	}
	cs := connectServe(t, endpoint)
	mres, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "vault_probe"})
	if err != nil || mres.IsError {
		t.Fatalf("vault_probe over MCP: %v %+v", err, mres)
	}
	b, _ := json.Marshal(mres.StructuredContent)
	check("quiver serve", b)
	cs.Close()
	serve.Process.Signal(syscall.SIGTERM)
	if err := serve.Wait(); err != nil {
		t.Errorf("quiver serve: %v\n%s", err, serveErr.String())
	}
	outputs = append(outputs, serveErr.String())

	// quiver mcp stdio.
	stdio := exec.Command(bin, "mcp", "stdio")
	stdio.Env = q.env
	stdioErr := &syncBuffer{}
	stdio.Stderr = stdioErr
	scs, err := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "1"}, nil).
		Connect(context.Background(), &sdk.CommandTransport{Command: stdio}, nil)
	if err != nil {
		t.Fatal(err)
	}
	sres, err := scs.CallTool(context.Background(), &sdk.CallToolParams{Name: "vault_probe"})
	if err != nil || sres.IsError {
		t.Fatalf("vault_probe over stdio: %v %+v", err, sres)
	}
	b, _ = json.Marshal(sres.StructuredContent)
	check("quiver mcp stdio", b)
	for _, c := range sres.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			outputs = append(outputs, tc.Text)
		}
	}
	if err := scs.Close(); err != nil {
		t.Logf("closing the stdio session: %v", err)
	}
	outputs = append(outputs, stdioErr.String())

	// Both MCP doors recorded their call.
	if n := recordedResults(t, db); n < 2 {
		t.Errorf("%d results recorded, want the two MCP calls", n)
	}
	// The secret, in clear or in its common encodings, is in no output and no file.
	forms := []string{secretValue, base64.StdEncoding.EncodeToString([]byte(secretValue)), hex.EncodeToString([]byte(secretValue))}
	for _, out := range outputs {
		for _, f := range forms {
			if strings.Contains(out, f) {
				t.Errorf("the secret (%s form) was printed:\n%s", f[:6], out)
			}
		}
	}
	files := 0
	err = filepath.WalkDir(filepath.Dir(db), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		for _, f := range forms {
			if bytes.Contains(raw, []byte(f)) {
				t.Errorf("%s holds the secret (%s form)", path, f[:6])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 2 {
		t.Fatalf("searched %d files; the database is missing", files)
	}
}

// The layers: quiver call resolves on the user or agent given, then the instance; vars unset
// removes a value; bad invocations are usage errors.
func TestVarsLayersAndUsage(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		testVarsLayersAndUsage(t, []string{"--db", filepath.Join(t.TempDir(), "q.db")})
	})
	t.Run("postgres", func(t *testing.T) {
		dsn := pgtest.DSN(t) // skips without a server, fails under CI=true
		sep := "?"
		if strings.Contains(dsn, "?") {
			sep = "&"
		}
		schema := pgtest.Schema(t, dsn)
		st, err := postgres.Open(context.Background(), dsn, postgres.WithSchema(schema)) // creates the schema
		if err != nil {
			t.Fatal(err)
		}
		st.Close()
		testVarsLayersAndUsage(t, []string{"--postgres", dsn + sep + "search_path=" + schema})
	})
}

// testVarsLayersAndUsage runs the layer checks on the database dbArgs names.
func testVarsLayersAndUsage(t *testing.T, dbArgs []string) {
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	dir := writeFiles(t, map[string]string{"vault.js": vaultJS, "vault.json": vaultSchema})
	cli := func(stdin string, args ...string) (int, string, string) {
		t.Helper()
		return runCLI(t, stdin, append(args, dbArgs...)...)
	}
	if code, _, stderr := cli("", "tools", "add", "--js", filepath.Join(dir, "vault.js"), "--schema", filepath.Join(dir, "vault.json")); code != exitOK {
		t.Fatalf("tools add: %s", stderr)
	}
	set := func(stdin string, args ...string) {
		t.Helper()
		if code, _, stderr := cli(stdin, append([]string{"vars", "set"}, args...)...); code != exitOK {
			t.Fatalf("vars set %v: %s", args, stderr)
		}
	}
	set("tok-instance", "VAULT_TOKEN", "--secret")
	set("", "REGION", "eu-west")
	set("", "REGION", "us-east", "--user", "usr_1")
	set("", "REGION", "ap-south", "--agent", "mapper")
	region := func(args ...string) any {
		t.Helper()
		code, stdout, stderr := cli("", append([]string{"call", "vault_probe"}, args...)...)
		var r struct {
			Value json.RawMessage `json:"value"`
		}
		if code != exitOK || json.Unmarshal([]byte(stdout), &r) != nil {
			t.Fatalf("call %v: exit %d\n%s\n%s", args, code, stdout, stderr)
		}
		var v vaultValue
		if err := json.Unmarshal(r.Value, &v); err != nil {
			t.Fatal(err)
		}
		if v.Hash != fnv32a("tok-instance") {
			t.Errorf("call %v: the tool saw another token", args)
		}
		return v.Region
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{nil, "eu-west"},
		{[]string{"--user", "usr_1"}, "us-east"},
		{[]string{"--agent", "mapper"}, "ap-south"},
		{[]string{"--agent", "mapper", "--user", "usr_1"}, "ap-south"}, // agent before user (V2)
		{[]string{"--user", "usr_2"}, "eu-west"},
	} {
		if got := region(tt.args...); got != tt.want {
			t.Errorf("call %v: REGION %v, want %s", tt.args, got, tt.want)
		}
	}
	code, stdout, _ := cli("", "vars", "list", "--user", "usr_1", "--json")
	if code != exitOK || !strings.Contains(stdout, `"us-east"`) || strings.Contains(stdout, "eu-west") {
		t.Errorf("vars list --user: %s", stdout)
	}
	if code, _, stderr := cli("", "vars", "unset", "REGION", "--user", "usr_1"); code != exitOK {
		t.Fatalf("vars unset: %s", stderr)
	}
	if got := region("--user", "usr_1"); got != "eu-west" {
		t.Errorf("after unset: REGION %v", got)
	}
	if code, _, stderr := runCLI(t, "", "vars"); code != exitUsage || !strings.Contains(stderr, "set, list or unset") {
		t.Errorf("vars: exit %d\n%s", code, stderr)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"vars", "get"}, "unknown vars subcommand"},
		{[]string{"vars", "set"}, "needs a NAME"},
		{[]string{"vars", "set", "A", "1", "--user", "u", "--agent", "a"}, "at most one"},
		{[]string{"vars", "set", "A"}, "no value for A on standard input"},
		{[]string{"vars", "unset"}, "exactly one NAME"},
		{[]string{"vars", "list", "extra"}, "takes no arguments"},
	} {
		code, _, stderr := cli("", tt.args...)
		if code != exitUsage || !strings.Contains(stderr, tt.want) {
			t.Errorf("%v: exit %d, stderr lacks %q:\n%s", tt.args, code, tt.want, stderr)
		}
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"vars", "set", "BAD\tNAME", "x"}, "without control characters"},
		{[]string{"vars", "set", "A", "x", "--thread", "thr_missing"}, "no thread thr_missing"},
		{[]string{"vars", "unset", "NOPE"}, "NOPE has no value on the instance"},
	} {
		code, _, stderr := cli("", tt.args...)
		if code != exitError || !strings.Contains(stderr, tt.want) {
			t.Errorf("%v: exit %d, stderr lacks %q:\n%s", tt.args, code, tt.want, stderr)
		}
	}
}

// V3: quiver run checks the prompt's required variables (and the others: required_test.go)
// before it creates the thread, so a refused run leaves no thread behind; --var gives a text
// value on the run's thread and refuses a secret.
func TestRunChecksVariablesBeforeCreatingTheThread(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	dir := t.TempDir()
	script := filepath.Join(dir, "script.yaml")
	agentFile := filepath.Join(dir, "agent.yaml")
	files := map[string]string{
		script: "turns:\n  - text: Ready.\n",
		agentFile: `name: mapper
system: You map things.
tools: []
tenvs:
  type: object
  properties:
    REGION: {type: string, description: where to map}
    MAP_KEY: {type: string, format: password}
  required: [REGION]
`,
	}
	for p, body := range files {
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	db := filepath.Join(dir, "q.db")
	threads := func() int {
		t.Helper()
		sdb, err := sql.Open("sqlite", "file:"+db+"?mode=ro")
		if err != nil {
			t.Fatal(err)
		}
		defer sdb.Close()
		var n int
		if err := sdb.QueryRow(`SELECT count(*) FROM threads`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	code, _, stderr := runCLI(t, "", "run", "--agent", agentFile, "--model", "scripted:"+script, "--db", db, "hello")
	if code != exitError || !strings.Contains(stderr, "REGION (where to map; required by prompt mapper)") || !strings.Contains(stderr, "--var NAME=VALUE") {
		t.Fatalf("run without REGION: exit %d\n%s", code, stderr)
	}
	if n := threads(); n != 0 {
		t.Fatalf("a refused run left %d thread(s)", n)
	}
	code, _, stderr = runCLI(t, "", "run", "--agent", agentFile, "--model", "scripted:"+script, "--db", db, "--var", "MAP_KEY=abc", "hello")
	if code != exitUsage || !strings.Contains(stderr, "MAP_KEY is a secret") {
		t.Fatalf("--var on a secret: exit %d\n%s", code, stderr)
	}
	code, stdout, stderr := runCLI(t, "", "run", "--agent", agentFile, "--model", "scripted:"+script, "--db", db, "--var", "REGION=nordics", "hello")
	if code != exitOK || strings.TrimSpace(stdout) != "Ready." {
		t.Fatalf("run with --var: exit %d\n%s\n%s", code, stdout, stderr)
	}
	id := regexp.MustCompile(`thread (thr_\w+)`).FindStringSubmatch(stderr)
	if id == nil || threads() != 1 {
		t.Fatalf("no thread reported, or %d threads:\n%s", threads(), stderr)
	}
	code, stdout, _ = runCLI(t, "", "vars", "list", "--thread", id[1], "--db", db)
	if code != exitOK || !regexp.MustCompile(`REGION\s+nordics`).MatchString(stdout) {
		t.Fatalf("the thread's variables: %s", stdout)
	}
	if code, _, stderr := runCLI(t, "", "run", "--db", db, "--var", "novalue", "hi"); code != exitUsage || !strings.Contains(stderr, "NAME=VALUE") {
		t.Fatalf("--var without =: exit %d\n%s", code, stderr)
	}
}
