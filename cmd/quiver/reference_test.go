package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// update makes the tests that check generated pages write them instead: go generate runs
// TestCLIReference with it.
var update = flag.Bool("update", false, "write the generated documentation pages instead of checking them")

// cliReferencePage is the CLI reference, relative to this package.
const cliReferencePage = "../../docs/reference/cli.md"

// regenerateCLI is the command that remakes the CLI reference, from the repository's root.
const regenerateCLI = "go generate ./cmd/quiver (or: go test -run '^TestCLIReference$' ./cmd/quiver -args -update)"

// TestCLIReference: docs/reference/cli.md is what the commands table and the commands' flags
// make; a command or a flag added, renamed or reworded without regenerating it fails here,
// naming the command that regenerates it.
func TestCLIReference(t *testing.T) {
	got, err := cliReference()
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.MkdirAll(filepath.Dir(cliReferencePage), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(cliReferencePage, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	committed, err := os.ReadFile(cliReferencePage)
	if err != nil {
		t.Fatalf("%v: make it with %s", err, regenerateCLI)
	}
	if string(committed) != got {
		t.Errorf("docs/reference/cli.md is not what the commands table makes (%s): regenerate it with %s", firstDifference(string(committed), got), regenerateCLI)
	}
}

// firstDifference names the first line where have and want differ.
func firstDifference(have, want string) string {
	h, w := strings.Split(have, "\n"), strings.Split(want, "\n")
	for i := range max(len(h), len(w)) {
		var a, b string
		if i < len(h) {
			a = h[i]
		}
		if i < len(w) {
			b = w[i]
		}
		if a != b {
			return fmt.Sprintf("line %d is %q, the table makes %q", i+1, a, b)
		}
	}
	return "they differ"
}

// TestAboutsReadOnAPage: the reference joins a command's description into one paragraph, so a
// line that opens with a placeholder's legend ("D: openai, ...", written to sit under the
// synopsis in the help) reads as a broken sentence there; name the flag instead ("--dialect
// is openai, ...").
func TestAboutsReadOnAPage(t *testing.T) {
	legend := regexp.MustCompile(`^[A-Z][A-Z_]*: `)
	for _, c := range commands {
		if c.hidden {
			continue
		}
		for i, line := range strings.Split(c.about, "\n") {
			if legend.MatchString(line) {
				t.Errorf("quiver %s: line %d of its description opens with a placeholder's legend: %q", c.name, i+1, line)
			}
		}
	}
}

// TestEveryCommandDescribes: describe reaches every command's parse, so the reference and the
// documentation's checks know every flag without running a command.
func TestEveryCommandDescribes(t *testing.T) {
	for i := range commands {
		c := &commands[i]
		if c.hidden {
			continue
		}
		fs, err := describe(c)
		if err != nil {
			t.Error(err)
			continue
		}
		if c.store && fs.Lookup("db") == nil {
			t.Errorf("quiver %s takes the store flags, but its description has no --db", c.name)
		}
	}
}

// cliReference is the CLI reference page: every command the help shows, its synopsis, what it
// does and each of its flags with its default and help.
func cliReference() (string, error) {
	var b strings.Builder
	b.WriteString("# The quiver command\n\n")
	b.WriteString("<!-- Generated from the commands table (cmd/quiver/commands.go) by " + regenerateCLI + ". Do not edit. -->\n\n")
	b.WriteString("`quiver help` prints the same commands; `quiver COMMAND -h` prints a command's flags. ")
	b.WriteString("The exit status is 0 on success, 1 when the call returned an error result (or the command failed), 2 on a usage error.\n\n")
	b.WriteString("Flags may come before or after the arguments. A flag's value follows it (`--name N`) or an equals sign (`--name=N`); ")
	b.WriteString("a boolean flag is set by its name alone (`--json`) and unset with `=false` (`--journal=false`).\n\n")
	b.WriteString("## Commands\n\n")
	for _, c := range commands {
		if !c.hidden {
			fmt.Fprintf(&b, "- [`quiver %s`](#%s): %s\n", c.name, anchorOf("quiver "+c.name), strings.ReplaceAll(c.about, "\n", " "))
		}
	}
	for i := range commands {
		c := &commands[i]
		if c.hidden {
			continue
		}
		fs, err := describe(c)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "\n## quiver %s\n\n", c.name)
		fmt.Fprintf(&b, "```text\n%s\n```\n\n", strings.TrimRight("quiver "+c.name+" "+c.synopsis, " "))
		fmt.Fprintf(&b, "%s%s.\n", strings.ToUpper(c.about[:1]), strings.ReplaceAll(c.about[1:], "\n", " "))
		writeFlags(&b, fs)
	}
	return b.String(), nil
}

// writeFlags writes fs's flags as a table: the flag with its value's kind, its default and its
// help.
func writeFlags(b *strings.Builder, fs *flag.FlagSet) {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n == 0 {
		b.WriteString("\nNo flags.\n")
		return
	}
	b.WriteString("\n| Flag | Default | What it does |\n|---|---|---|\n")
	fs.VisitAll(func(f *flag.Flag) {
		kind, usage := flag.UnquoteUsage(f)
		name := "--" + f.Name
		if kind != "" {
			name += " " + kind
		}
		def := "`" + f.DefValue + "`"
		switch {
		case f.DefValue == "" || kind == "value":
			def = "none"
		case f.DefValue == "0" && kind == "duration":
			def = "`0`"
		}
		fmt.Fprintf(b, "| `%s` | %s | %s |\n", name, def, strings.ReplaceAll(usage, "|", `\|`))
	})
}

// anchorOf is GitHub's anchor of a heading made of words, spaces and hyphens.
func anchorOf(heading string) string {
	return strings.ReplaceAll(strings.ToLower(heading), " ", "-")
}
