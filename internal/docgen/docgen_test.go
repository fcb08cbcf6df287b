package docgen

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestPagesFresh: each generated page is what the code makes now; a field, a comment or an
// instrument changed without regenerating fails here, naming the command that regenerates.
func TestPagesFresh(t *testing.T) {
	root := filepath.Join("..", "..")
	for page, make := range Pages {
		t.Run(page, func(t *testing.T) {
			want, err := make(root)
			if err != nil {
				t.Fatal(err)
			}
			have, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(page)))
			if err != nil {
				t.Fatalf("%v: make it with %s", err, Regenerate)
			}
			if string(have) != want {
				hl, wl := strings.Split(string(have), "\n"), strings.Split(want, "\n")
				i := 0
				for i < len(hl) && i < len(wl) && hl[i] == wl[i] {
					i++
				}
				t.Errorf("%s is not what the code makes (from line %d): regenerate it with %s", page, i+1, Regenerate)
			}
		})
	}
}

// TestConfigCoversEveryField: the page names every key of the file, each with an example and
// a description, and every object by its Go type.
func TestConfigCoversEveryField(t *testing.T) {
	page, err := Config(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"`name`", "`servers`", "`oauth`", "`client_secret`", "`max_operations`", "`provider_name`", "`openWorldHint`", "`console_params`", "`workspace`"} {
		if !strings.Contains(page, "| "+key+" |") {
			t.Errorf("the configuration page has no row for %s", key)
		}
	}
	for line := range strings.Lines(page) {
		if strings.HasPrefix(line, "| `") && strings.Count(line, "|") >= 6 {
			cells := strings.Split(line, "|")
			if strings.TrimSpace(cells[4]) == "``" {
				t.Errorf("a row with no example: %s", line)
			}
			if strings.TrimSpace(cells[5]) == "" {
				t.Errorf("a row with no description (give the field a doc comment): %s", line)
			}
		}
		// An anonymous struct's fields have no doc comments to describe them by.
		if line == "Go type: `struct`.\n" {
			t.Error("a section of an anonymous struct type: name the type and document it")
		}
	}
	if !slices.Contains(strings.Split(page, "\n"), "## mcp.servers[].oauth") {
		t.Error("no section for the OAuth block of an MCP server")
	}
}
