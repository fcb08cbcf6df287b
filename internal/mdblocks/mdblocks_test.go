package mdblocks

import (
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestBlocks(t *testing.T) {
	md := "# T\n\n```sh {no-run: serves; exit=1}\nquiver serve\n```\n\n- item:\n\n  ```json\n  {\"a\": 1}\n  ```\n\n````md\n```go\n````\n```\nplain\n```\n"
	blocks, err := Blocks("x.md", md)
	if err != nil {
		t.Fatal(err)
	}
	want := []Block{
		{File: "x.md", Line: 3, Lang: "sh", Attrs: map[string]string{"no-run": "serves", "exit": "1"}, Text: "quiver serve\n"},
		{File: "x.md", Line: 9, Lang: "json", Attrs: map[string]string{}, Text: "{\"a\": 1}\n"},
		{File: "x.md", Line: 13, Lang: "md", Attrs: map[string]string{}, Text: "```go\n"},
		{File: "x.md", Line: 16, Lang: "", Attrs: map[string]string{}, Text: "plain\n"},
	}
	if len(blocks) != len(want) {
		t.Fatalf("got %d blocks, want %d: %+v", len(blocks), len(want), blocks)
	}
	for i, b := range blocks {
		w := want[i]
		if b.Line != w.Line || b.Lang != w.Lang || b.Text != w.Text || !maps.Equal(b.Attrs, w.Attrs) {
			t.Errorf("block %d: %+v, want %+v", i, b, w)
		}
	}
	if n, err := blocks[0].Exit(); n != 1 || err != nil {
		t.Errorf("Exit: %d, %v", n, err)
	}
	for _, bad := range []string{"```sh\nx\n", "```sh no-test\nx\n```\n"} {
		if _, err := Blocks("bad.md", bad); err == nil {
			t.Errorf("Blocks(%q): no error", bad)
		}
	}
}

func TestAnchors(t *testing.T) {
	md := "# Deploying Quiver\n## The fleet's configuration\n## What the nodes share, and what they keep\n" +
		"### `quiver serve` flags\n## Links: [a](b.md)\n## Notes\n## Notes\n```\n# not a heading\n```\n<a id=\"custom\"></a>\n#hashtag\n"
	got := Anchors(md)
	for _, want := range []string{"deploying-quiver", "the-fleets-configuration", "what-the-nodes-share-and-what-they-keep",
		"quiver-serve-flags", "links-a", "notes", "notes-1", "custom"} {
		if !got[want] {
			t.Errorf("no anchor %q among %v", want, slices.Sorted(maps.Keys(got)))
		}
	}
	for _, unwanted := range []string{"not-a-heading", "hashtag"} {
		if got[unwanted] {
			t.Errorf("anchor %q made of what is not a heading", unwanted)
		}
	}
}

func TestLinks(t *testing.T) {
	md := "See [deploy](docs/DEPLOY.md#kubernetes), ![pic](img.png \"title\") and `[not](a-link.md)`.\n" +
		"```\n[also not](x.md)\n```\n[ref]: CONTRIBUTING.md\n"
	var got []string
	for _, l := range Links(md) {
		got = append(got, l.Target)
	}
	if want := []string{"docs/DEPLOY.md#kubernetes", "img.png", "CONTRIBUTING.md"}; !slices.Equal(got, want) {
		t.Errorf("links %q, want %q", got, want)
	}
}

// TestPagesLinks: every relative link of README.md, CONTRIBUTING.md and docs/**/*.md names a
// file or directory of the repository, and every anchor (#heading) a heading of its page, as
// GitHub makes anchors; so a page renamed or a heading reworded breaks this test, not a
// reader's click.
func TestPagesLinks(t *testing.T) {
	root := filepath.Join("..", "..")
	pages, err := Pages(root)
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]map[string]bool{}
	anchorsOf := func(page string) map[string]bool {
		if a, ok := anchors[page]; ok {
			return a
		}
		md, err := os.ReadFile(filepath.Join(root, page))
		if err != nil {
			t.Fatal(err)
		}
		anchors[page] = Anchors(string(md))
		return anchors[page]
	}
	checked := 0
	for _, page := range pages {
		md, err := os.ReadFile(filepath.Join(root, page))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range Links(string(md)) {
			if strings.Contains(l.Target, "://") || strings.HasPrefix(l.Target, "mailto:") || l.Target == "" {
				continue
			}
			checked++
			file, anchor, _ := strings.Cut(l.Target, "#")
			target := page
			if file != "" {
				target = path.Clean(path.Join(path.Dir(page), file))
				if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(target))); err != nil || strings.HasPrefix(target, "../") {
					t.Errorf("%s:%d: the link %q names %s, which the repository does not have", page, l.Line, l.Target, target)
					continue
				}
			}
			if anchor != "" && strings.HasSuffix(target, ".md") && !anchorsOf(target)[anchor] {
				t.Errorf("%s:%d: the link %q names the anchor #%s, which no heading of %s makes (GitHub's anchors: lower case, punctuation dropped, spaces made hyphens)",
					page, l.Line, l.Target, anchor, target)
			}
		}
	}
	t.Logf("%d relative links checked in %d pages", checked, len(pages))
}

// TestREADMEShort: the README is the front door (issue 48): a paragraph, the two commands, a
// tour and links. It grew to 1,600 lines once, an hour of reading before the first task, so a
// page that outgrows the door fails here: move the text to a page under docs/ and link it.
func TestREADMEShort(t *testing.T) {
	const most = 200
	md, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(md), "\n"); n > most {
		t.Errorf("README.md has %d lines, more than %d: move the detail to a page under docs/ and link it from docs/index.md", n, most)
	}
}

// TestPagesOneClickAway: every page under docs/ is linked from README.md or docs/index.md, and
// the index from the README, so that a reader at the front door finds any page without
// knowing the tree; a page added without a link fails here.
func TestPagesOneClickAway(t *testing.T) {
	root := filepath.Join("..", "..")
	pages, err := Pages(root)
	if err != nil {
		t.Fatal(err)
	}
	linked := map[string]map[string]bool{} // by the page that links: the pages it links to
	for _, from := range []string{"README.md", "docs/index.md"} {
		md, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(from)))
		if err != nil {
			t.Fatal(err)
		}
		linked[from] = map[string]bool{}
		for _, l := range Links(string(md)) {
			file, _, _ := strings.Cut(l.Target, "#")
			if file != "" && !strings.Contains(file, "://") {
				linked[from][path.Clean(path.Join(path.Dir(from), file))] = true
			}
		}
	}
	if !linked["README.md"]["docs/index.md"] {
		t.Error("README.md does not link docs/index.md, the list of every page")
	}
	checked := 0
	for _, page := range pages {
		if !strings.HasPrefix(page, "docs/") || page == "docs/index.md" {
			continue
		}
		checked++
		if !linked["README.md"][page] && !linked["docs/index.md"][page] {
			t.Errorf("%s is linked from neither README.md nor docs/index.md: add it to the index, under what a reader wants it for", page)
		}
		// A task's page (a tutorial, a how-to guide) is one click from the front door itself.
		if (strings.HasPrefix(page, "docs/tutorials/") || strings.HasPrefix(page, "docs/guides/")) && !linked["README.md"][page] {
			t.Errorf("%s, a task's page, is not linked from README.md: a new user finds every task's page there in one click", page)
		}
	}
	if checked == 0 {
		t.Fatal("no page under docs/: is the test run from internal/mdblocks?")
	}
}
