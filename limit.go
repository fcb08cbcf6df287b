package quiver

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/quiverhq/quiver/schema"
)

// DefaultMaxResultBytes is the result limit of a Dispatcher whose MaxResultBytes is zero.
//
// The limit bounds one result, all its parts together: text, error, stack, structured value,
// problems, content and attachment data (base64, as carried), metadata, and 32 bytes for each
// item of a list (content, problems, attachments). A tool's output reaches the caller, every hook, the
// store and a model's context, so one call that returns megabytes (an error message built in a
// loop) would cost that much memory, database and tokens each time.
// Over the limit, the limit is shared evenly among the parts (a part smaller than its share
// keeps all of it and leaves the rest to the others):
//
//   - text (the result, error, stack, text content items, problem messages) keeps its
//     beginning and ends with a marker that says how many bytes were cut;
//   - a structured value cannot be cut as JSON: when it does not fit its share it is replaced
//     by its beginning as text (a success whose tool declares an output schema becomes an
//     error result, CodeResultTooLarge, since a success without its value would break the
//     schema); the value of an error result, which only adds to the error, is left out;
//   - binary content, resources, attachments and the metadata are kept whole or left out;
//
// and a note saying what was left out is added where the model reads the result.
const DefaultMaxResultBytes = 1 << 20

// maxCodeBytes bounds a result's code: an identifier, which a tool could make arbitrarily long.
const maxCodeBytes = 64

func (d *Dispatcher) limitResult(next Handler) Handler {
	limit := d.MaxResultBytes
	if limit <= 0 {
		limit = DefaultMaxResultBytes
	}
	return func(ctx context.Context, c *Call) *Result {
		r := next(ctx, c)
		size := resultSize(r)
		if size <= limit {
			return r
		}
		declared := c.tool != nil && c.tool.declaresOutput()
		c.resultCut = true
		return capResult(r, size, limit, c.Name, declared)
	}
}

// resultSize is what the limit counts: the bytes of every part of r that a tool controls.
func resultSize(r *Result) int {
	n := len(r.Text) + len(r.Value) + len(r.Error) + len(r.Stack) + len(r.Code) + len(r.Meta)
	for i := range r.Problems {
		n += problemSize(&r.Problems[i])
	}
	for i := range r.Content {
		n += contentSize(&r.Content[i])
	}
	for i := range r.Attachments {
		n += attachmentSize(&r.Attachments[i])
	}
	return n
}

// itemOverhead is counted for each content item, problem and attachment besides its strings:
// about what its JSON adds around them, so that a million empty items do not pass as nothing.
const itemOverhead = 32

func contentSize(c *Content) int {
	return itemOverhead + len(c.Type) + len(c.Text) + len(c.Data) + len(c.MimeType) + len(c.URI)
}

func problemSize(p *schema.Problem) int { return itemOverhead + len(p.Pointer) + len(p.Message) }

func attachmentSize(a *Attachment) int {
	return itemOverhead + len(a.ID) + len(a.Type) + len(a.Path) + len(a.Name) + len(a.MimeType) + len(a.Data) + len(a.Description)
}

// The parts the limit is shared among.
const (
	partError = iota
	partText
	partStack
	partValue
	partProblems
	partContent
	partAttachments
	partMeta
	numParts
)

// capResult returns a copy of r cut to about limit bytes (see DefaultMaxResultBytes); r and
// the slices it shares with the tool are left as they were. The markers and notes it adds come
// on top of the limit: a few hundred bytes.
func capResult(r *Result, size, limit int, tool string, declared bool) *Result {
	out := *r
	lm := limiter{limit: limit, total: size}
	if len(out.Code) > maxCodeBytes {
		out.Code = ""
		if out.IsError() {
			out.Code = CodeToolError
		}
	}
	budget := max(limit-len(out.Code), 0)

	sizes := out.partSizes()
	if level := fairLevel(sizes, budget); len(out.Value) > level {
		value := string(out.Value)
		out.Value = nil
		size := commas(len(value))
		switch {
		case out.IsError():
			lm.note("the structured value (%s bytes) was left out", size)
		case declared:
			out.Status, out.Code = StatusError, CodeResultTooLarge
			out.Error = fmt.Sprintf("the result of %s is %s bytes, over the result limit of %s, and its structured value (%s bytes) cannot be cut; its beginning, as text (not valid JSON):\n",
				tool, commas(lm.total), byteSize(limit), size) + value
		case out.Text == "":
			out.Text = value
			lm.note("the result above is the beginning of a structured value of %s bytes, as text: it is not valid JSON", size)
		default:
			lm.note("the structured value (%s bytes) was left out", size)
		}
		sizes = out.partSizes()
	}
	// Metadata is JSON too, and only for people and programs: over its share it goes whole,
	// leaving its room to the parts the model reads.
	if level := fairLevel(sizes, budget); len(out.Meta) > level {
		lm.note("the metadata (%s bytes) was left out", commas(len(out.Meta)))
		out.Meta = nil
		sizes = out.partSizes()
	}
	level := fairLevel(sizes, budget)
	out.Error = lm.cut(out.Error, level)
	out.Text = lm.cut(out.Text, level)
	out.Stack = lm.cut(out.Stack, level)
	if sizes[partProblems] > level {
		out.Problems = lm.cutProblems(out.Problems, level)
	}
	if sizes[partContent] > level {
		out.Content = lm.cutContent(out.Content, level)
	}
	if sizes[partAttachments] > level {
		out.Attachments = lm.cutAttachments(out.Attachments, level)
	}
	lm.attachNotes(&out)
	return &out
}

func (r *Result) partSizes() []int {
	s := make([]int, numParts)
	s[partError], s[partText], s[partStack], s[partValue] = len(r.Error), len(r.Text), len(r.Stack), len(r.Value)
	s[partMeta] = len(r.Meta)
	for i := range r.Problems {
		s[partProblems] += problemSize(&r.Problems[i])
	}
	for i := range r.Content {
		s[partContent] += contentSize(&r.Content[i])
	}
	for i := range r.Attachments {
		s[partAttachments] += attachmentSize(&r.Attachments[i])
	}
	return s
}

// fairLevel is the most each part may keep so that all of them fit in budget, a part smaller
// than that keeping its size and leaving the rest to the others (max-min fairness).
func fairLevel(sizes []int, budget int) int {
	sorted := slices.Sorted(slices.Values(sizes))
	left := budget
	for i, s := range sorted {
		share := left / (len(sorted) - i)
		if s > share {
			return share
		}
		left -= s
	}
	return budget
}

type limiter struct {
	limit, total int
	notes        []string
}

func (lm *limiter) note(format string, args ...any) {
	lm.notes = append(lm.notes, fmt.Sprintf(format, args...))
}

// cut keeps at most n bytes of s (never splitting a character) and says how much was cut.
// Secrets were masked in s before: a prefix of it holds none, and a mask cut in two reveals
// nothing.
func (lm *limiter) cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	n = max(n, 0)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + fmt.Sprintf("…[truncated: %s of %s bytes cut; the result limit is %s]",
		commas(len(s)-n), commas(len(s)), byteSize(lm.limit))
}

// cutContent keeps the items that fit in n bytes, in order; the first text item that does not
// fit is cut, binary and resource items that do not are left out whole.
func (lm *limiter) cutContent(items []Content, n int) []Content {
	out := make([]Content, 0, len(items))
	dropped, droppedBytes := 0, 0
	for _, c := range items {
		size := contentSize(&c)
		if size <= n {
			out = append(out, c)
			n -= size
			continue
		}
		if room := n - (size - len(c.Text)); c.Type == ContentText && room > 0 {
			c.Text = lm.cut(c.Text, room)
			out = append(out, c)
			n = 0
			continue
		}
		dropped++
		droppedBytes += size
	}
	if dropped > 0 {
		lm.note("%s of %s content items (%s bytes) were left out", commas(dropped), commas(len(items)), commas(droppedBytes))
	}
	return nilIfEmpty(out)
}

// cutProblems keeps the problems that fit in n bytes, in order, cutting the message of the
// first one that does not.
func (lm *limiter) cutProblems(items []schema.Problem, n int) []schema.Problem {
	out := make([]schema.Problem, 0, len(items))
	dropped := 0
	for _, p := range items {
		size := problemSize(&p)
		if size <= n {
			out = append(out, p)
			n -= size
			continue
		}
		if room := n - (size - len(p.Message)); room > 0 {
			p.Message = lm.cut(p.Message, room)
			out = append(out, p)
			n = 0
			continue
		}
		dropped++
	}
	if dropped > 0 {
		lm.note("%s of %s problems were left out", commas(dropped), commas(len(items)))
	}
	return nilIfEmpty(out)
}

// cutAttachments keeps the attachments that fit in n bytes, in order; an attachment is a file
// (or a reference to one), which is kept whole or left out.
func (lm *limiter) cutAttachments(items []Attachment, n int) []Attachment {
	out := make([]Attachment, 0, len(items))
	var dropped []string
	for _, a := range items {
		if size := attachmentSize(&a); size <= n {
			out = append(out, a)
			n -= size
			continue
		}
		if len(dropped) < 3 {
			dropped = append(dropped, fmt.Sprintf("%q (%s bytes)", truncate(a.Name, 60), commas(len(a.Data))))
		} else if len(dropped) == 3 {
			dropped = append(dropped, "...")
		}
	}
	if len(dropped) > 0 {
		lm.note("%s of %s attachments were left out: %s", commas(len(items)-len(out)), commas(len(items)), strings.Join(dropped, ", "))
	}
	return nilIfEmpty(out)
}

// attachNotes puts the notes where the model reads the result (see ModelText): the error, the
// text, or a text content item when the text is empty and the model reads the value or the
// content.
func (lm *limiter) attachNotes(r *Result) {
	if len(lm.notes) == 0 {
		return
	}
	note := fmt.Sprintf("[%s; the result was %s bytes, over the result limit of %s]",
		strings.Join(lm.notes, "; "), commas(lm.total), byteSize(lm.limit))
	switch {
	case r.IsError():
		r.Error = joinLines(r.Error, note)
	case r.Text != "":
		r.Text = joinLines(r.Text, note)
	case len(r.Value) > 0 || len(r.Content) > 0:
		r.Content = append(slices.Clip(r.Content), TextContent(note))
	default:
		r.Text = note
	}
}

// nilIfEmpty keeps a list emptied by the limit what an empty list is everywhere else: nil,
// which the store reads back as it was written.
func nilIfEmpty[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return s
}

func joinLines(a, b string) string {
	if a == "" {
		return b
	}
	return a + "\n" + b
}

// commas writes n with thousands separators: byte counts a model (or a person) reads.
func commas(n int) string {
	s := strconv.Itoa(n)
	start := 0
	if n < 0 {
		start = 1
	}
	var b strings.Builder
	for i, c := range s {
		if i > start && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// byteSize writes a limit the way an operator sets it: 1 MiB, 256 KiB, or bytes.
func byteSize(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.Itoa(n>>20) + " MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.Itoa(n>>10) + " KiB"
	}
	return commas(n) + " bytes"
}
