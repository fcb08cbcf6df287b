// Package mdblocks reads the Markdown pages of the repository for the tests that keep them
// true: the fenced code blocks (with the language and the attributes of their fence), the
// headings' anchors as GitHub makes them, and the relative links.
//
// A fence's info string is a language followed by an optional group of attributes in braces,
// separated by semicolons, which GitHub ignores:
//
//	```sh {no-run: it serves until stopped}
//	```go {no-test: a fragment of the program above}
//	```yaml {config}
//	```sh {exit=1}
package mdblocks

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// Block is one fenced code block of a page.
type Block struct {
	File string // the page, relative to the repository's root, with slashes
	Line int    // the line of the opening fence, from 1
	Lang string // the info string's first word, in lower case ("" for none)
	// Attrs are the attributes of the fence: {no-test: why; exit=1} gives "no-test": "why"
	// and "exit": "1"; a bare word has the value "".
	Attrs map[string]string
	Text  string // the lines between the fences, without the fence's indentation
}

// Where names the block in messages: "docs/DEPLOY.md:56 (sh)".
func (b Block) Where() string {
	return fmt.Sprintf("%s:%d (%s)", b.File, b.Line, cmpOr(b.Lang, "no language"))
}

// Has reports whether the fence gives the attribute name.
func (b Block) Has(name string) bool {
	_, ok := b.Attrs[name]
	return ok
}

// NoTest is the reason the fence gives for the block not being checked at all ({no-test:
// reason}), and whether it gives one.
func (b Block) NoTest() (string, bool) {
	why, ok := b.Attrs["no-test"]
	return why, ok
}

// Exit is the exit status the fence says the block ends with ({exit=N}); 0 when it says none.
func (b Block) Exit() (int, error) {
	v, ok := b.Attrs["exit"]
	if !ok {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("%s: exit=%q is not a number", b.Where(), v)
	}
	return n, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// Pages lists the repository's Markdown pages that the documentation tests check: README.md,
// CONTRIBUTING.md (when there is one) and every .md file under docs/, relative to root, with
// slashes, sorted.
func Pages(root string) ([]string, error) {
	var pages []string
	for _, top := range []string{"README.md", "CONTRIBUTING.md"} {
		if _, err := os.Stat(filepath.Join(root, top)); err == nil {
			pages = append(pages, top)
		}
	}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			pages = append(pages, filepath.ToSlash(rel))
		}
		return nil
	})
	slices.Sort(pages)
	return pages, err
}

// fence is an opening or closing fence: up to three spaces (more inside a list item, which
// this reader allows), then three or more backticks or tildes.
var fence = regexp.MustCompile("^( *)(`{3,}|~{3,})(.*)$")

// Blocks returns the fenced code blocks of md, the page file.
func Blocks(file, md string) ([]Block, error) {
	var blocks []Block
	var open *Block
	var marker, indent string
	var text strings.Builder
	n := 0
	for line := range strings.Lines(md) {
		n++
		line = strings.TrimRight(line, "\r\n")
		m := fence.FindStringSubmatch(line)
		switch {
		case open == nil && m != nil:
			lang, attrs, err := parseInfo(m[3])
			if err != nil {
				return nil, fmt.Errorf("%s:%d: %v", file, n, err)
			}
			open = &Block{File: file, Line: n, Lang: lang, Attrs: attrs}
			marker, indent = m[2], m[1]
			text.Reset()
		case open != nil && m != nil && m[2][0] == marker[0] && len(m[2]) >= len(marker) && strings.TrimSpace(m[3]) == "":
			open.Text = text.String()
			blocks = append(blocks, *open)
			open = nil
		case open != nil:
			text.WriteString(strings.TrimPrefix(line, indent) + "\n")
		}
	}
	if open != nil {
		return nil, fmt.Errorf("%s:%d: the block opened here is never closed", file, open.Line)
	}
	return blocks, nil
}

// parseInfo reads a fence's info string: "sh {no-run: why; exit=1}".
func parseInfo(info string) (string, map[string]string, error) {
	info = strings.TrimSpace(info)
	lang, rest, _ := strings.Cut(info, " ")
	if i := strings.IndexByte(lang, '{'); i >= 0 { // "sh{...}"
		lang, rest = lang[:i], lang[i:]+" "+rest
	}
	attrs := map[string]string{}
	rest = strings.TrimSpace(rest)
	if rest == "" {
		return strings.ToLower(lang), attrs, nil
	}
	if !strings.HasPrefix(rest, "{") || !strings.HasSuffix(rest, "}") {
		return "", nil, fmt.Errorf("the fence's %q after the language is not {attributes}: write ```%s {no-test: why}, say", rest, lang)
	}
	for part := range strings.SplitSeq(rest[1:len(rest)-1], ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		i := strings.IndexAny(part, ":=")
		if i < 0 {
			attrs[part] = ""
			continue
		}
		attrs[strings.TrimSpace(part[:i])] = strings.TrimSpace(part[i+1:])
	}
	return strings.ToLower(lang), attrs, nil
}

// Anchors returns the anchors of md's headings as GitHub makes them (lower case; letters,
// digits, spaces, hyphens and underscores kept, spaces made hyphens, a repeated one suffixed
// -1, -2...), and the ids of its HTML anchors (<a id="x"> or name="x").
func Anchors(md string) map[string]bool {
	anchors := map[string]bool{}
	counts := map[string]int{}
	for _, line := range prose(md) {
		for _, m := range htmlAnchor.FindAllStringSubmatch(line.text, -1) {
			anchors[m[1]] = true
		}
		hashes := len(line.text) - len(strings.TrimLeft(line.text, "#"))
		if hashes == 0 || hashes > 6 || (len(line.text) > hashes && line.text[hashes] != ' ') {
			continue
		}
		slug := Slug(strings.TrimSpace(strings.TrimRight(strings.TrimSpace(line.text[hashes:]), "#")))
		if c := counts[slug]; c > 0 {
			anchors[fmt.Sprintf("%s-%d", slug, c)] = true
		} else {
			anchors[slug] = true
		}
		counts[slug]++
	}
	return anchors
}

var (
	htmlAnchor = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	mdLink     = regexp.MustCompile(`!?\[([^\]]*)\]\(([^)\s]*)(?:\s+"[^"]*")?\)`)
	refDef     = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s+(\S+)`)
	codeSpan   = regexp.MustCompile("`+[^`]*`+")
	htmlTag    = regexp.MustCompile(`<[^>]+>`)
)

// Slug is the anchor GitHub makes of a heading's text (before numbering repeats).
func Slug(heading string) string {
	heading = mdLink.ReplaceAllString(heading, "$1")
	heading = htmlTag.ReplaceAllString(heading, "")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Link is a link of a page: its target as written and the line it is on.
type Link struct {
	Line   int
	Target string
}

// Links returns the links of md outside code (inline links, images and reference
// definitions), with their targets as written.
func Links(md string) []Link {
	var links []Link
	for _, line := range prose(md) {
		text := codeSpan.ReplaceAllString(line.text, "")
		for _, m := range mdLink.FindAllStringSubmatch(text, -1) {
			links = append(links, Link{Line: line.n, Target: strings.Trim(m[2], "<>")})
		}
		if m := refDef.FindStringSubmatch(text); m != nil {
			links = append(links, Link{Line: line.n, Target: strings.Trim(m[1], "<>")})
		}
	}
	return links
}

type numbered struct {
	n    int
	text string
}

// prose returns md's lines outside fenced code blocks.
func prose(md string) []numbered {
	var out []numbered
	var marker string
	n := 0
	for line := range strings.Lines(md) {
		n++
		line = strings.TrimRight(line, "\r\n")
		m := fence.FindStringSubmatch(line)
		switch {
		case marker == "" && m != nil:
			marker = m[2]
		case marker != "" && m != nil && m[2][0] == marker[0] && len(m[2]) >= len(marker) && strings.TrimSpace(m[3]) == "":
			marker = ""
		case marker == "":
			out = append(out, numbered{n, line})
		}
	}
	return out
}
