package quiver_test

import (
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fencedBlocks returns the text of every block of md fenced as ```lang.
func fencedBlocks(md, lang string) []string {
	var blocks []string
	var b strings.Builder
	in := false
	for line := range strings.Lines(md) {
		switch {
		case !in && strings.TrimSpace(line) == "```"+lang:
			in = true
			b.Reset()
		case in && strings.TrimSpace(line) == "```":
			in = false
			blocks = append(blocks, b.String())
		case in:
			b.WriteString(line)
		}
	}
	return blocks
}

// outputMarker starts a program's closing comment that says what it prints, as in Go's
// examples.
const outputMarker = "// Output:\n"

// TestREADMEGoPrograms compiles and runs every Go block of the README as a reader would: a
// program of a module of its own that requires Quiver, here replaced by this checkout. A block
// is a whole program that ends with "// Output:" and the lines it prints, which must be what
// it prints; a snippet that is not a program fails to build, and one that prints something
// else fails the comparison.
func TestREADMEGoPrograms(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the README's programs with the go command")
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := fencedBlocks(string(readme), "go")
	if len(blocks) == 0 {
		t.Fatal("the README has no Go block")
	}
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
	// The program's module requires what Quiver's does, at the same versions, so that it
	// builds from the module cache the repository's own build filled, with no network.
	_, requires, _ := strings.Cut(string(goMod), "\n")
	mod := "module example.com/readme\n" + requires +
		"\nrequire github.com/quiverhq/quiver v0.0.0\n\nreplace github.com/quiverhq/quiver => " + repo + "\n"
	for i, block := range blocks {
		first, _, _ := strings.Cut(block, "\n")
		t.Run(first, func(t *testing.T) {
			_, want, ok := strings.Cut(block, outputMarker)
			if !ok {
				t.Fatalf("Go block %d of the README does not end with %q and the lines it prints", i+1, strings.TrimSpace(outputMarker))
			}
			dir := t.TempDir()
			for name, content := range map[string]string{"go.mod": mod, "go.sum": string(goSum), "main.go": block} {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			cmd := exec.Command("go", "run", ".") // go test puts its own go first on PATH
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "GOFLAGS=-mod=readonly")
			out, err := cmd.Output()
			if err != nil {
				var stderr []byte
				if ee, ok := err.(*exec.ExitError); ok {
					stderr = ee.Stderr
				}
				t.Fatalf("go run: %v\n%s%s\nthe program:\n%s", err, out, stderr, block)
			}
			var lines []string
			for line := range strings.Lines(want) {
				lines = append(lines, strings.TrimPrefix(strings.TrimPrefix(strings.TrimRight(line, "\n"), "//"), " "))
			}
			if got, want := strings.TrimSpace(string(out)), strings.TrimSpace(strings.Join(lines, "\n")); got != want {
				t.Errorf("the program printed:\n%s\nthe README says:\n%s", got, want)
			}
		})
	}
}

// TestREADMEJSONBlocks: every JSON block of the README (the MCP clients' configurations among
// them) parses, so that what a reader copies into a client's file is JSON, without the
// comments or trailing commas some clients forgive and others refuse. A block may hold several
// values one after the other (alternative request bodies, one a line); each must parse.
func TestREADMEJSONBlocks(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := fencedBlocks(string(readme), "json")
	if len(blocks) == 0 {
		t.Fatal("the README has no JSON block")
	}
	for i, block := range blocks {
		dec := json.NewDecoder(strings.NewReader(block))
		for n := 0; ; n++ {
			var v any
			err := dec.Decode(&v)
			if err == io.EOF && n > 0 {
				break
			}
			if err != nil {
				t.Errorf("JSON block %d of the README does not parse: %v\n%s", i+1, err, block)
				break
			}
		}
	}
}
