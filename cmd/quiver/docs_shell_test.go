package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/quiverhq/quiver/internal/mdblocks"
)

// The pages' shell blocks (```sh, bash, shell or console, in README.md, CONTRIBUTING.md and
// docs/**/*.md) name commands that exist: each command's first word is quiver (or go run
// ./cmd/quiver) with a command and flags of the commands table, or a tool a reader has
// (knownTools). Text blocks' lines that start with a quiver command (a synopsis, a console
// transcript's "$ quiver ...") are checked the same way. Outside the README, whose blocks
// cmd/quiver/readme_test.go runs one by one, a page's blocks whose commands all run offline
// (quiver commands that neither serve nor need a model or PostgreSQL, and file set-up) are run
// in order, in one folder and data directory, as a reader following the page would: each
// must end with exit status 0, or the one its fence gives ({exit=1}). A block that should not
// run says why on its fence ({no-run: why}); {no-test: why} skips every check.

// knownTools are the first words of commands the pages may show besides quiver.
var knownTools = []string{
	"go", "curl", "docker", "kubectl", "psql", "pg_isready", "npx", "npm", "node", "git", "claude", "code", "cursor", "gemini", "codex",
	"cat", "mkdir", "cd", "echo", "printf", "export", "ls", "rm", "cp", "mv", "jq", "openssl", "sudo", "apt-get", "brew", "bash", "sh",
	"haproxy", "kill", "sleep", "chmod", "tar", "gh", "helm", "set", "unset",
	"grep", "head", "tail", "wait", "env", "benchstat", "pprof", "xdg-open", "open", "true", "test", "[",
	"sqlite3", "pg_dump", "pg_restore", "createdb", "dropdb", "base64", "tee", "xargs", "sort", "wc", "diff", "sed", "awk", "touch",
	"systemctl", "journalctl", "nc", "wget", "unzip", "source", ".",
}

// shellKeywords start or end a compound command: the words after do, then, else, if, while
// and until are a command; for and case lines, and the closing words, are not checked.
var (
	commandKeywords = []string{"do", "then", "else", "if", "while", "until", "time", "!", "{"}
	skippedKeywords = []string{"for", "case", "done", "fi", "esac", "}", "in"}
)

// offlineTools are the set-up commands a run block may hold beside quiver's.
var offlineTools = []string{"cat", "mkdir", "cd", "echo", "printf", "export", "ls", "rm", "cp", "mv", "true", "test", "chmod", "grep", "head", "tail"}

// onlineCommands are the quiver commands a page's block is not run for: they serve until
// stopped, or need a model.
var onlineCommands = []string{"serve", "mcp stdio", "run"}

// docCommand is one command of a shell block: its words, as the shell splits them.
type docCommand struct {
	words []string
	line  string
}

// TestDocsShellBlocks checks every shell block's commands, and runs the pages' offline ones.
func TestDocsShellBlocks(t *testing.T) {
	root := filepath.Join("..", "..")
	pages, err := mdblocks.Pages(root)
	if err != nil {
		t.Fatal(err)
	}
	flags := commandFlags(t)
	var bin string
	checked, run, notRun := 0, 0, []string{}
	for _, page := range pages {
		md, err := os.ReadFile(filepath.Join(root, page))
		if err != nil {
			t.Fatal(err)
		}
		blocks, err := mdblocks.Blocks(page, string(md))
		if err != nil {
			t.Fatal(err)
		}
		var toRun []mdblocks.Block
		for _, b := range blocks {
			if _, no := b.NoTest(); no {
				continue
			}
			shell := slices.Contains([]string{"sh", "bash", "shell", "console"}, b.Lang)
			if !shell && b.Lang != "text" && b.Lang != "" {
				continue
			}
			cmds := blockCommands(b.Text, shell)
			for _, c := range cmds {
				checked++
				if err := checkCommand(c, flags, shell); err != nil {
					t.Errorf("%s: %q: %v", b.Where(), c.line, err)
				}
			}
			if !shell || page == "README.md" || len(cmds) == 0 {
				continue
			}
			if why, ok := b.Attrs["no-run"]; ok {
				notRun = append(notRun, b.Where()+": "+why)
			} else if runsOffline(b, cmds) {
				toRun = append(toRun, b)
			} else {
				notRun = append(notRun, b.Where()+": needs a server, a model, PostgreSQL or the network")
			}
		}
		if len(toRun) == 0 {
			continue
		}
		if bin == "" {
			bin = quiverBinary(t)
		}
		run += len(toRun)
		t.Run(page, func(t *testing.T) { runPageBlocks(t, bin, toRun) })
	}
	t.Logf("%d commands checked; %d blocks run; not run (besides the README's, which readme_test.go runs):\n%s", checked, run, strings.Join(notRun, "\n"))
}

// commandFlags describes every command: its name and its flag set.
func commandFlags(t *testing.T) map[string]*flag.FlagSet {
	t.Helper()
	out := map[string]*flag.FlagSet{}
	for i := range commands {
		if commands[i].hidden {
			continue
		}
		fs, err := describe(&commands[i])
		if err != nil {
			t.Fatal(err)
		}
		out[commands[i].name] = fs
	}
	return out
}

var (
	heredoc    = regexp.MustCompile(`<<-?\s*['"]?(\w+)['"]?`)
	separator  = regexp.MustCompile(`^(&&|\|\||;|\||&)$`)
	assignment = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)
)

// blockCommands splits a block into its commands. In a shell block: the lines joined where they
// end with a backslash, here-documents' bodies left out, comments dropped, and, when some
// lines start with "$ " (a transcript), only those. In a text block: the lines that start
// with "quiver " or "$ quiver ", a synopsis's brackets and bars dropped.
func blockCommands(text string, shell bool) []docCommand {
	lines := strings.Split(strings.ReplaceAll(text, "\\\n", " "), "\n")
	prompted := slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, "$ ") })
	var out []docCommand
	var until string
	for _, line := range lines {
		if until != "" {
			if strings.TrimSpace(line) == until {
				until = ""
			}
			continue
		}
		if m := heredoc.FindStringSubmatch(line); m != nil && shell {
			until = m[1]
		}
		if prompted || !shell {
			var ok bool
			if line, ok = strings.CutPrefix(line, "$ "); !ok && (prompted || !strings.HasPrefix(line, "quiver ")) {
				continue
			}
		}
		if !shell {
			line = strings.NewReplacer("[", " ", "]", " ", " | ", " ", "...", " ").Replace(line)
		}
		var words []string
		for _, w := range shellWords(line) {
			if separator.MatchString(w) {
				if len(words) > 0 {
					out = append(out, docCommand{words, strings.TrimSpace(line)})
				}
				words = nil
				continue
			}
			words = append(words, w)
		}
		if len(words) > 0 {
			out = append(out, docCommand{words, strings.TrimSpace(line)})
		}
	}
	return out
}

// shellWords splits a line as the shell would, near enough: quotes kept together (and
// removed), a comment ends the line, the operators &&, ||, ;, | and & are words of their own,
// and a subshell's parentheses are dropped.
func shellWords(line string) []string {
	var words []string
	var w strings.Builder
	inWord := false
	var quote rune
	flush := func() {
		if inWord {
			words = append(words, w.String())
		}
		w.Reset()
		inWord = false
	}
	rs := []rune(line)
	depth := 0 // inside $( ... ): one word
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case depth > 0:
			w.WriteRune(r)
			if r == '(' {
				depth++
			} else if r == ')' {
				depth--
			}
		case r == '$' && i+1 < len(rs) && rs[i+1] == '(':
			w.WriteString("$(")
			i++
			depth, inWord = 1, true
		case r == '&' && (strings.HasSuffix(w.String(), ">") || strings.HasSuffix(w.String(), "<")):
			w.WriteRune(r) // 2>&1
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				w.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == '#' && !inWord:
			flush()
			return words
		case r == ' ' || r == '\t' || r == '(' || r == ')':
			flush()
		case r == ';' || r == '|' || r == '&':
			flush()
			op := string(r)
			if i+1 < len(rs) && (rs[i+1] == '&' || rs[i+1] == '|') && r != ';' {
				op += string(rs[i+1])
				i++
			}
			if op == "|&" || op == "&|" {
				op = "|"
			}
			words = append(words, op)
		default:
			w.WriteRune(r)
			inWord = true
		}
	}
	flush()
	return words
}

// quiverArgs returns the arguments of a quiver command (after "quiver" or "go run
// ./cmd/quiver"), and whether c is one; variable assignments before it are skipped.
func quiverArgs(c docCommand) ([]string, bool) {
	w := c.words
	for len(w) > 0 && (assignment.MatchString(w[0]) || slices.Contains(commandKeywords, w[0])) {
		w = w[1:]
	}
	switch {
	case len(w) > 0 && (w[0] == "quiver" || strings.HasSuffix(w[0], "/quiver")):
		return w[1:], true
	case len(w) > 2 && w[0] == "go" && w[1] == "run" && (w[2] == "./cmd/quiver" || w[2] == "github.com/quiverhq/quiver/cmd/quiver" || strings.HasPrefix(w[2], "github.com/quiverhq/quiver/cmd/quiver@")):
		return w[3:], true
	}
	return w, false
}

// checkCommand checks c: a quiver command of the table with flags it takes, or a known tool.
func checkCommand(c docCommand, flags map[string]*flag.FlagSet, shell bool) error {
	args, isQuiver := quiverArgs(c)
	if !isQuiver {
		if !shell || len(args) == 0 || slices.Contains(skippedKeywords, args[0]) {
			return nil
		}
		first := args[0]
		if slices.Contains(knownTools, first) || strings.HasPrefix(first, "./") || strings.HasPrefix(first, "/") || strings.HasPrefix(first, "$") {
			return nil
		}
		if _, err := os.Stat(filepath.Join("..", "..", filepath.FromSlash(first))); err == nil && strings.Contains(first, "/") {
			return nil // a script of the repository's, .ci/run say
		}
		return fmt.Errorf("%s is neither quiver nor a tool the pages may name (knownTools in cmd/quiver/docs_shell_test.go)", first)
	}
	if len(args) == 0 || slices.Contains([]string{"help", "-h", "--help", "--version"}, args[0]) {
		return nil
	}
	name, fs := "", (*flag.FlagSet)(nil)
	for cmd, set := range flags {
		words := strings.Fields(cmd)
		if len(args) >= len(words) && slices.Equal(args[:len(words)], words) && len(cmd) > len(name) {
			name, fs = cmd, set
		}
	}
	if fs == nil {
		return fmt.Errorf("quiver has no command %q (quiver help lists them)", strings.Join(args[:min(2, len(args))], " "))
	}
	for _, a := range args[len(strings.Fields(name)):] {
		if a == "--" {
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" || regexp.MustCompile(`^-\d`).MatchString(a) {
			continue
		}
		flagName, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if flagName == "h" || flagName == "help" {
			continue
		}
		if fs.Lookup(flagName) == nil {
			var have []string
			fs.VisitAll(func(f *flag.Flag) { have = append(have, "--"+f.Name) })
			return fmt.Errorf("quiver %s has no flag --%s (it has %s)", name, flagName, strings.Join(have, ", "))
		}
	}
	return nil
}

// runsOffline reports whether every command of b is an offline quiver command or a set-up
// command, with nothing that names PostgreSQL or a URL.
func runsOffline(b mdblocks.Block, cmds []docCommand) bool {
	if strings.Contains(b.Text, "postgres") || strings.Contains(b.Text, "http://") || strings.Contains(b.Text, "https://") {
		return false
	}
	for _, c := range cmds {
		args, isQuiver := quiverArgs(c)
		if !isQuiver {
			if len(args) == 0 || !slices.Contains(offlineTools, args[0]) {
				return false
			}
			continue
		}
		for _, online := range onlineCommands {
			if strings.HasPrefix(strings.Join(args, " ")+" ", online+" ") {
				return false
			}
		}
	}
	return true
}

// runPageBlocks runs a page's offline blocks in order, in one folder and data directory, with
// the quiver built from this checkout first on PATH.
func runPageBlocks(t *testing.T, bin string, blocks []mdblocks.Block) {
	dir := t.TempDir()
	env := append(os.Environ(), "PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"HOME="+dir, "XDG_DATA_HOME="+filepath.Join(dir, "data"), "QUIVER_AGENTS=", "QUIVER_CONFIG=", "QUIVER_POSTGRES=")
	for _, b := range blocks {
		want, err := b.Exit()
		if err != nil {
			t.Error(err)
			continue
		}
		script := strings.ReplaceAll(b.Text, "go run ./cmd/quiver", "quiver")
		cmd := exec.Command("bash", "-c", script)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		if code := exitCode(t, err); code != want {
			t.Errorf("%s ended with exit status %d, want %d (give the status on the fence, {exit=%d}, or why it is not run, {no-run: why}):\n%s\nits output:\n%s",
				b.Where(), code, want, code, b.Text, out)
		}
	}
}

// TestShellWords: the splitting the checks rely on.
func TestShellWords(t *testing.T) {
	for _, c := range []struct {
		line string
		want []string
	}{
		{`quiver call x --args '{"a": 1}' # comment`, []string{"quiver", "call", "x", "--args", `{"a": 1}`}},
		{`mkdir a && (cd a; quiver version) | tee out &`, []string{"mkdir", "a", "&&", "cd", "a", ";", "quiver", "version", "|", "tee", "out", "&"}},
		{`FOO="a b" quiver vars set X`, []string{"FOO=a b", "quiver", "vars", "set", "X"}},
		{`export K=$(head -c 32 /dev/urandom | base64) && quiver serve > log 2>&1 &`,
			[]string{"export", "K=$(head -c 32 /dev/urandom | base64)", "&&", "quiver", "serve", ">", "log", "2>&1", "&"}},
	} {
		if got := shellWords(c.line); !slices.Equal(got, c.want) {
			t.Errorf("shellWords(%q) = %q, want %q", c.line, got, c.want)
		}
	}
	flags := commandFlags(t)
	for _, c := range []struct {
		text  string
		shell bool
		bad   bool
	}{
		{"quiver tools list --json", true, false},
		{"quiver tools list --jsn", true, true},
		{"quiver tool list", true, true},
		{"go run ./cmd/quiver call get_current_time --args '{}'", true, false},
		{"cat > x.yaml <<'YAML'\nnot: a command\nYAML\nquiver apply -f x.yaml --dry-run", true, false},
		{"frobnicate --now", true, true},
		{".ci/run", true, false},
		{".ci/no-such-script", true, true},
		{"for n in 2 3; do\n  quiver keys list --json\ndone", true, false},
		{"until curl -sf http://x/readyz; do sleep 0.5; done", true, false},
		{"for n in 2 3; do quiver keys lst; done", true, true},
		{"$ quiver keys create --name ci\nkey_123 created", true, false},
		{"quiver serve [--addr HOST:PORT] [--db PATH | --postgres DSN]", false, false},
		{"quiver serve [--adr HOST:PORT]", false, true},
		{"quiver: serving MCP at http://127.0.0.1:7411/mcp", false, false},
	} {
		var errs []error
		for _, cmd := range blockCommands(c.text, c.shell) {
			if err := checkCommand(cmd, flags, c.shell); err != nil {
				errs = append(errs, err)
			}
		}
		if (len(errs) > 0) != c.bad {
			t.Errorf("%q: errors %v, want bad %v", c.text, errs, c.bad)
		}
	}
}
