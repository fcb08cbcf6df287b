package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quiverhq/quiver/store"
)

// FilesStore is a backend with a thread file system: a store.Store, its store.Files (with the
// default caps), and the same file system under other caps.
type FilesStore interface {
	store.Store
	store.Files
	// WithFileLimits returns the store's file system with the given caps (zero fields keep
	// their defaults).
	WithFileLimits(store.FileLimits) store.Files
}

// RunFiles runs the file system conformance tests against stores returned by
// open, each test with a fresh, empty store:
//
//	func TestFilesConformance(t *testing.T) {
//		storetest.RunFiles(t, func(t *testing.T) storetest.FilesStore { return openTemp(t) })
//	}
func RunFiles(t *testing.T, open func(t *testing.T) FilesStore) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s FilesStore)
	}{
		{"WriteReadStat", testFilesWriteReadStat},
		{"Replace", testFilesReplace},
		{"ReadDir", testFilesReadDir},
		{"RemoveMkdirRmdir", testFilesRemoveMkdirRmdir},
		{"Grep", testFilesGrep},
		{"GrepBounds", testFilesGrepBounds},
		{"Find", testFilesFind},
		{"BadPaths", testFilesBadPaths},
		{"PathHelpers", testFilesPathHelpers},
		{"SizeCaps", testFilesSizeCaps},
		{"DefaultCaps", testFilesDefaultCaps},
		{"ConcurrentCaps", testFilesConcurrentCaps},
		{"UsageStaysExact", testFilesUsageExact},
		{"Attachments", testFilesAttachments},
		{"ReferencesPassThrough", testFilesReferences},
		{"CopyFiles", testFilesCopyFiles},
		{"CopyFilesAllOrNothing", testFilesCopyFilesAtomic},
		{"WorkspaceIsolation", testFilesIsolation},
		{"MissingThread", testFilesMissingThread},
		{"ConcurrentWriters", testFilesConcurrentWriters},
		{"BinaryRoundTrip", testFilesBinaryRoundTrip},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.fn(t, open(t)) })
	}
}

func fsMustWrite(t *testing.T, fs store.Files, threadID, p, data string) *store.FileInfo {
	t.Helper()
	fi, err := fs.WriteFile(ctx, ws, threadID, p, []byte(data), store.FileMeta{})
	if err != nil {
		t.Fatalf("WriteFile %s: %v", p, err)
	}
	return fi
}

func fsMustRead(t *testing.T, fs store.Files, threadID, p string) string {
	t.Helper()
	data, _, err := fs.ReadFile(ctx, ws, threadID, p)
	if err != nil {
		t.Fatalf("ReadFile %s: %v", p, err)
	}
	return string(data)
}

func fsMustAttach(t *testing.T, fs store.Files, threadID string, a store.NewAttachment) *store.FileInfo {
	t.Helper()
	fi, err := fs.AddAttachment(ctx, ws, threadID, a)
	if err != nil {
		t.Fatalf("AddAttachment %q: %v", a.Name, err)
	}
	return fi
}

func fsWantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s: got error %v, want %v", what, err, want)
	}
}

// fsNames returns the fsNames of entries.
func fsNames(entries []*store.FileInfo) []string {
	var out []string
	for _, e := range entries {
		out = append(out, e.Name)
	}
	return out
}

// fsRecent checks that a time is around now (the database clock may be another machine's).
func fsRecent(t *testing.T, what string, at time.Time) {
	t.Helper()
	if d := time.Since(at); d < -time.Minute || d > time.Minute {
		t.Errorf("%s: time %v is not around now", what, at)
	}
}

func testFilesWriteReadStat(t *testing.T, s FilesStore) {
	th := newThread(t, s, ws)
	fi := fsMustWrite(t, s, th.ID, "/notes/todo.txt", "buy milk\n")
	if !strings.HasPrefix(fi.ID, store.PrefixFile+"_") || fi.Path != "/notes/todo.txt" || fi.Name != "todo.txt" || fi.IsDir ||
		fi.Size != 9 || fi.MimeType != "text/plain; charset=utf-8" {
		t.Fatalf("WriteFile returned %+v", fi)
	}
	fsRecent(t, "ModTime", fi.ModTime)
	if got := fsMustRead(t, s, th.ID, "/notes/todo.txt"); got != "buy milk\n" {
		t.Fatalf("ReadFile = %q", got)
	}
	_, info, err := s.ReadFile(ctx, ws, th.ID, "/notes/todo.txt")
	if err != nil || info.ID != fi.ID || info.Size != 9 {
		t.Fatalf("ReadFile info = %+v, %v", info, err)
	}
	st, err := s.Stat(ctx, ws, th.ID, "/notes/todo.txt")
	if err != nil {
		t.Fatal(err)
	}
	if st.ID != fi.ID || st.Path != fi.Path || st.Name != fi.Name || st.Size != fi.Size || st.MimeType != fi.MimeType ||
		!st.ModTime.Equal(fi.ModTime) {
		t.Fatalf("Stat = %+v, WriteFile returned %+v", st, fi)
	}
	// The parent was created.
	dir, err := s.Stat(ctx, ws, th.ID, "/notes")
	if err != nil || !dir.IsDir || dir.Name != "notes" || dir.Size != 0 || !strings.HasPrefix(dir.ID, store.PrefixFile+"_") {
		t.Fatalf("Stat /notes = %+v, %v", dir, err)
	}
	root, err := s.Stat(ctx, ws, th.ID, "/")
	if err != nil || !root.IsDir || root.Path != "/" {
		t.Fatalf("Stat / = %+v, %v", root, err)
	}
	// Meta round trip, and an empty file.
	meta := store.FileMeta{MimeType: "image/png", Width: 640, Height: 480, Description: "a chart ✓"}
	if _, err := s.WriteFile(ctx, ws, th.ID, "/chart", []byte{}, meta); err != nil {
		t.Fatal(err)
	}
	data, info, err := s.ReadFile(ctx, ws, th.ID, "/chart")
	if err != nil || data == nil || len(data) != 0 {
		t.Fatalf("empty file: %q (nil %v), %v", data, data == nil, err)
	}
	if info.MimeType != meta.MimeType || info.Width != 640 || info.Height != 480 || info.Description != meta.Description {
		t.Fatalf("meta = %+v, want %+v", info, meta)
	}
	// Errors.
	_, _, err = s.ReadFile(ctx, ws, th.ID, "/notes")
	fsWantErr(t, "ReadFile of a directory", err, store.ErrInvalid)
	_, _, err = s.ReadFile(ctx, ws, th.ID, "/")
	fsWantErr(t, "ReadFile of the root", err, store.ErrInvalid)
	_, _, err = s.ReadFile(ctx, ws, th.ID, "/notes/missing.txt")
	fsWantErr(t, "ReadFile of a missing file", err, store.ErrNotFound)
	_, err = s.Stat(ctx, ws, th.ID, "/missing")
	fsWantErr(t, "Stat of a missing file", err, store.ErrNotFound)
	_, err = s.WriteFile(ctx, ws, th.ID, "/x", nil, store.FileMeta{MimeType: "not a type"})
	fsWantErr(t, "a bad MIME type", err, store.ErrInvalid)
	_, err = s.WriteFile(ctx, ws, th.ID, "/x", nil, store.FileMeta{Width: -1})
	fsWantErr(t, "a negative width", err, store.ErrInvalid)
	_, err = s.WriteFile(ctx, ws, th.ID, "/x", nil, store.FileMeta{Description: "nul\x00"})
	fsWantErr(t, "a NUL in the description", err, store.ErrInvalid)
	if _, err := s.Stat(ctx, ws, th.ID, "/x"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a refused write left a file: %v", err)
	}
}

func testFilesReplace(t *testing.T, s FilesStore) {
	th := newThread(t, s, ws)
	first := fsMustWrite(t, s, th.ID, "/a.txt", "first version, rather long")
	second, err := s.WriteFile(ctx, ws, th.ID, "/a.txt", []byte("second"), store.FileMeta{MimeType: "text/markdown", Description: "d"})
	if err != nil {
		t.Fatal(err)
	}
	if got := fsMustRead(t, s, th.ID, "/a.txt"); got != "second" {
		t.Fatalf("after replace: %q", got)
	}
	st, _ := s.Stat(ctx, ws, th.ID, "/a.txt")
	if st.Size != 6 || st.MimeType != "text/markdown" || st.Description != "d" || st.ID != second.ID {
		t.Fatalf("after replace: %+v", st)
	}
	if second.ID == first.ID {
		t.Error("a replaced file kept its id: references to the old content would not notice")
	}
	// The meta is replaced, not merged.
	fsMustWrite(t, s, th.ID, "/a.txt", "third")
	if st, _ := s.Stat(ctx, ws, th.ID, "/a.txt"); st.Description != "" || st.MimeType != "text/plain; charset=utf-8" {
		t.Fatalf("meta after a plain write: %+v", st)
	}
	if entries, _ := s.ReadDir(ctx, ws, th.ID, "/"); len(entries) != 1 {
		t.Fatalf("replacing made %d entries", len(entries))
	}
	fsMustWrite(t, s, th.ID, "/dir/f", "x")
	_, err = s.WriteFile(ctx, ws, th.ID, "/dir", []byte("x"), store.FileMeta{})
	fsWantErr(t, "writing over a directory", err, store.ErrInvalid)
	_, err = s.WriteFile(ctx, ws, th.ID, "/a.txt/under", []byte("x"), store.FileMeta{})
	fsWantErr(t, "writing under a file", err, store.ErrInvalid)
	_, err = s.WriteFile(ctx, ws, th.ID, "/a.txt/deep/under", []byte("x"), store.FileMeta{})
	fsWantErr(t, "writing deep under a file", err, store.ErrInvalid)
	_, err = s.WriteFile(ctx, ws, th.ID, "/", []byte("x"), store.FileMeta{})
	fsWantErr(t, "writing the root", err, store.ErrInvalid)
	if got := fsMustRead(t, s, th.ID, "/a.txt"); got != "third" {
		t.Fatalf("a refused write changed the file: %q", got)
	}
}

func testFilesReadDir(t *testing.T, s FilesStore) {
	th := newThread(t, s, ws)
	for _, p := range []string{"/b", "/a.txt", "/a", "/C", "/é", "/a-b", "/sub/inner.txt", "/sub/deeper/x"} {
		fsMustWrite(t, s, th.ID, p, p)
	}
	entries, err := s.ReadDir(ctx, ws, th.ID, "/")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"C", "a", "a-b", "a.txt", "b", "sub", "é"} // byte order
	if got := fsNames(entries); !slices.Equal(got, want) {
		t.Fatalf("ReadDir / = %v, want %v", got, want)
	}
	for _, e := range entries {
		if e.Name == "sub" && !e.IsDir || e.Name == "a.txt" && (e.IsDir || e.Size != 6 || e.Path != "/a.txt") {
			t.Errorf("entry %+v", e)
		}
	}
	sub, err := s.ReadDir(ctx, ws, th.ID, "/sub")
	if err != nil || !slices.Equal(fsNames(sub), []string{"deeper", "inner.txt"}) {
		t.Fatalf("ReadDir /sub = %v, %v", fsNames(sub), err)
	}
	if _, err := s.Mkdir(ctx, ws, th.ID, "/empty"); err != nil {
		t.Fatal(err)
	}
	if empty, err := s.ReadDir(ctx, ws, th.ID, "/empty"); err != nil || empty == nil || len(empty) != 0 {
		t.Fatalf("ReadDir of an empty directory = %v, %v", fsNames(empty), err)
	}
	_, err = s.ReadDir(ctx, ws, th.ID, "/a.txt")
	fsWantErr(t, "ReadDir of a file", err, store.ErrInvalid)
	_, err = s.ReadDir(ctx, ws, th.ID, "/nothing")
	fsWantErr(t, "ReadDir of a missing directory", err, store.ErrNotFound)
	// A fresh thread's root is empty, and exists.
	other := newThread(t, s, ws)
	if entries, err := s.ReadDir(ctx, ws, other.ID, "/"); err != nil || len(entries) != 0 {
		t.Fatalf("a fresh thread's root: %v, %v", fsNames(entries), err)
	}
}

func testFilesRemoveMkdirRmdir(t *testing.T, s FilesStore) {
	th := newThread(t, s, ws)
	fsMustWrite(t, s, th.ID, "/d/f.txt", "x")
	if err := s.Remove(ctx, ws, th.ID, "/d/f.txt"); err != nil {
		t.Fatal(err)
	}
	_, err := s.Stat(ctx, ws, th.ID, "/d/f.txt")
	fsWantErr(t, "Stat after Remove", err, store.ErrNotFound)
	fsWantErr(t, "Remove twice", s.Remove(ctx, ws, th.ID, "/d/f.txt"), store.ErrNotFound)
	fsWantErr(t, "Remove of a directory", s.Remove(ctx, ws, th.ID, "/d"), store.ErrInvalid)
	fsWantErr(t, "Remove of the root", s.Remove(ctx, ws, th.ID, "/"), store.ErrInvalid)

	dir, err := s.Mkdir(ctx, ws, th.ID, "/x/y/z")
	if err != nil {
		t.Fatal(err)
	}
	if !dir.IsDir || dir.Path != "/x/y/z" || dir.Name != "z" || !strings.HasPrefix(dir.ID, store.PrefixFile+"_") {
		t.Fatalf("Mkdir returned %+v", dir)
	}
	fsRecent(t, "Mkdir ModTime", dir.ModTime)
	for _, p := range []string{"/x", "/x/y"} {
		if fi, err := s.Stat(ctx, ws, th.ID, p); err != nil || !fi.IsDir {
			t.Fatalf("Mkdir did not create the parent %s: %+v %v", p, fi, err)
		}
	}
	_, err = s.Mkdir(ctx, ws, th.ID, "/x/y/z")
	fsWantErr(t, "Mkdir of an existing directory", err, store.ErrExists)
	_, err = s.Mkdir(ctx, ws, th.ID, "/")
	fsWantErr(t, "Mkdir of the root", err, store.ErrExists)
	fsMustWrite(t, s, th.ID, "/file", "x")
	_, err = s.Mkdir(ctx, ws, th.ID, "/file")
	fsWantErr(t, "Mkdir over a file", err, store.ErrExists)
	_, err = s.Mkdir(ctx, ws, th.ID, "/file/sub")
	fsWantErr(t, "Mkdir under a file", err, store.ErrInvalid)

	fsWantErr(t, "Rmdir of a directory that is not empty", s.Rmdir(ctx, ws, th.ID, "/x/y"), store.ErrInvalid)
	fsWantErr(t, "Rmdir of a file", s.Rmdir(ctx, ws, th.ID, "/file"), store.ErrInvalid)
	fsWantErr(t, "Rmdir of the root", s.Rmdir(ctx, ws, th.ID, "/"), store.ErrInvalid)
	fsWantErr(t, "Rmdir of a missing directory", s.Rmdir(ctx, ws, th.ID, "/nothing"), store.ErrNotFound)
	for _, p := range []string{"/x/y/z", "/x/y", "/x"} {
		if err := s.Rmdir(ctx, ws, th.ID, p); err != nil {
			t.Fatalf("Rmdir %s: %v", p, err)
		}
	}
	if entries, _ := s.ReadDir(ctx, ws, th.ID, "/"); !slices.Equal(fsNames(entries), []string{"d", "file"}) {
		t.Fatalf("left: %v", fsNames(entries))
	}
	// A file whose name has a directory's as prefix does not make the directory non-empty.
	if _, err := s.Mkdir(ctx, ws, th.ID, "/p"); err != nil {
		t.Fatal(err)
	}
	fsMustWrite(t, s, th.ID, "/p2/f", "x")
	fsMustWrite(t, s, th.ID, "/p.txt", "x")
	if err := s.Rmdir(ctx, ws, th.ID, "/p"); err != nil {
		t.Fatalf("Rmdir of an empty directory with look-alike neighbours: %v", err)
	}
}

func testFilesGrep(t *testing.T, s FilesStore) {
	th := newThread(t, s, ws)
	fsMustWrite(t, s, th.ID, "/src/main.go", "package main\n\nfunc main() {\n\tprintln(\"TODO: greet\")\n}\n")
	fsMustWrite(t, s, th.ID, "/src/util.go", "package main\r\n// TODO tidy\r\nfunc helper() {}")
	fsMustWrite(t, s, th.ID, "/docs/readme.md", "# Readme\nTODO: write docs\n")
	fsMustWrite(t, s, th.ID, "/srcs/other.go", "TODO: not under /src\n")
	if _, err := s.WriteFile(ctx, ws, th.ID, "/src/blob.bin", []byte("TODO\x00binary\nTODO"), store.FileMeta{}); err != nil {
		t.Fatal(err)
	}
	matches, truncated, err := s.Grep(ctx, ws, th.ID, "/src", `TODO:? \w+`)
	if err != nil || truncated {
		t.Fatalf("Grep: %v, truncated %v", err, truncated)
	}
	want := []store.GrepMatch{
		{Path: "/src/main.go", Line: 4, Text: "\tprintln(\"TODO: greet\")"},
		{Path: "/src/util.go", Line: 2, Text: "// TODO tidy"},
	}
	if !slices.Equal(matches, want) {
		t.Fatalf("Grep /src = %+v, want %+v", matches, want)
	}
	all, _, err := s.Grep(ctx, ws, th.ID, "/", `^TODO`)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 || all[0].Path != "/docs/readme.md" || all[0].Line != 2 || all[1].Path != "/srcs/other.go" {
		t.Fatalf("Grep / ^TODO = %+v", all)
	}
	one, _, err := s.Grep(ctx, ws, th.ID, "/docs/readme.md", `Readme`)
	if err != nil || len(one) != 1 || one[0].Line != 1 || one[0].Text != "# Readme" {
		t.Fatalf("Grep of one file = %+v, %v", one, err)
	}
	if none, truncated, err := s.Grep(ctx, ws, th.ID, "/", `no such text`); err != nil || none == nil || len(none) != 0 || truncated {
		t.Fatalf("Grep without matches = %+v %v %v", none, truncated, err)
	}
	// A long line comes back shortened.
	fsMustWrite(t, s, th.ID, "/long.txt", "needle "+strings.Repeat("é", 1000))
	long, _, err := s.Grep(ctx, ws, th.ID, "/long.txt", `needle`)
	if err != nil || len(long) != 1 || len(long[0].Text) > store.MaxGrepLineBytes || !strings.HasPrefix(long[0].Text, "needle é") {
		t.Fatalf("long line: %d bytes, %v", len(long[0].Text), err)
	}
	_, _, err = s.Grep(ctx, ws, th.ID, "/", `(unclosed`)
	fsWantErr(t, "a bad pattern", err, store.ErrInvalid)
	_, _, err = s.Grep(ctx, ws, th.ID, "/", ``)
	fsWantErr(t, "an empty pattern", err, store.ErrInvalid)
	_, _, err = s.Grep(ctx, ws, th.ID, "/missing", `x`)
	fsWantErr(t, "a missing root", err, store.ErrNotFound)
	_, _, err = s.Grep(ctx, ws, th.ID, "src", `x`)
	fsWantErr(t, "a relative root", err, store.ErrInvalid)
}

func testFilesGrepBounds(t *testing.T, s FilesStore) {
	th := newThread(t, s, ws)
	for i := range 5 {
		fsMustWrite(t, s, th.ID, fmt.Sprintf("/f%d.txt", i), "hit\nhit\nmiss\n") // 13 bytes
	}
	few := s.WithFileLimits(store.FileLimits{MaxGrepMatches: 3})
	matches, truncated, err := few.Grep(ctx, ws, th.ID, "/", `hit`)
	if err != nil || len(matches) != 3 || !truncated {
		t.Fatalf("MaxGrepMatches 3: %d matches, truncated %v, %v", len(matches), truncated, err)
	}
	if matches[2].Path != "/f1.txt" || matches[2].Line != 1 {
		t.Fatalf("the first matches in order, got %+v", matches)
	}
	exact := s.WithFileLimits(store.FileLimits{MaxGrepMatches: 10})
	if matches, truncated, _ := exact.Grep(ctx, ws, th.ID, "/", `hit`); len(matches) != 10 || truncated {
		t.Fatalf("exactly as many matches as the limit: %d, truncated %v", len(matches), truncated)
	}
	small := s.WithFileLimits(store.FileLimits{MaxGrepBytes: 30}) // two files of 13 bytes
	matches, truncated, err = small.Grep(ctx, ws, th.ID, "/", `hit`)
	if err != nil || len(matches) != 4 || !truncated {
		t.Fatalf("MaxGrepBytes 30: %d matches, truncated %v, %v", len(matches), truncated, err)
	}
}

func testFilesFind(t *testing.T, s FilesStore) {
	th := newThread(t, s, ws)
	for _, p := range []string{"/src/main.go", "/src/lib/util.go", "/src/lib/util_test.go", "/src/README.md",
		"/docs/guide.md", "/docs/img/logo.png", "/srcx/a.go", "/main.go"} {
		fsMustWrite(t, s, th.ID, p, "x")
	}
	tests := []struct {
		root, pattern string
		want          []string
	}{
		{"/", "*.go", []string{"/main.go", "/src/lib/util.go", "/src/lib/util_test.go", "/src/main.go", "/srcx/a.go"}},
		{"/src", "*.go", []string{"/src/lib/util.go", "/src/lib/util_test.go", "/src/main.go"}},
		{"/src", "*_test.go", []string{"/src/lib/util_test.go"}},
		{"/", "lib", []string{"/src/lib"}},
		{"/", "/src/**/*.go", []string{"/src/lib/util.go", "/src/lib/util_test.go", "/src/main.go"}},
		{"/", "/*/*.md", []string{"/docs/guide.md", "/src/README.md"}},
		{"/docs", "img/*", []string{"/docs/img/logo.png"}},
		{"/docs", "**/*.png", []string{"/docs/img/logo.png"}},
		{"/", "**", []string{"/docs", "/docs/guide.md", "/docs/img", "/docs/img/logo.png", "/main.go", "/src", "/src/README.md",
			"/src/lib", "/src/lib/util.go", "/src/lib/util_test.go", "/src/main.go", "/srcx", "/srcx/a.go"}},
		{"/docs", "", []string{"/docs/guide.md", "/docs/img", "/docs/img/logo.png"}},
		{"/", "[a-m]*.?o", []string{"/main.go", "/src/main.go", "/srcx/a.go"}},
		{"/", "nothing*", nil},
	}
	for _, tt := range tests {
		got, truncated, err := s.Find(ctx, ws, th.ID, tt.root, tt.pattern)
		if err != nil || truncated || !slices.Equal(got, tt.want) {
			t.Errorf("Find(%q, %q) = %q, %v, %v; want %q", tt.root, tt.pattern, got, truncated, err, tt.want)
		}
	}
	few := s.WithFileLimits(store.FileLimits{MaxFindResults: 2})
	if got, truncated, err := few.Find(ctx, ws, th.ID, "/", "*.go"); err != nil || !truncated || !slices.Equal(got, []string{"/main.go", "/src/lib/util.go"}) {
		t.Errorf("MaxFindResults 2: %q, truncated %v, %v", got, truncated, err)
	}
	_, _, err := s.Find(ctx, ws, th.ID, "/", "[")
	fsWantErr(t, "a bad pattern", err, store.ErrInvalid)
	_, _, err = s.Find(ctx, ws, th.ID, "/main.go", "*")
	fsWantErr(t, "a file as root", err, store.ErrInvalid)
	_, _, err = s.Find(ctx, ws, th.ID, "/missing", "*")
	fsWantErr(t, "a missing root", err, store.ErrNotFound)
}

// fsBadPaths break one rule of store.CheckPath each.
var fsBadPaths = map[string]string{
	"traversal":          "/a/../../etc/passwd",
	"dot-dot at the end": "/a/..",
	"dot segment":        "/a/./b",
	"relative":           "etc/passwd",
	"dot relative":       "./a",
	"empty":              "",
	"NUL":                "/a\x00b",
	"doubled slash":      "//etc/passwd",
	"inner double":       "/a//b",
	"trailing slash":     "/a/",
	"backslash":          "/a\\..\\b",
	"windows path":       "C:\\Windows\\system32",
	"invalid UTF-8":      "/a\xff\xfe",
	"newline":            "/a\nb",
	"too long":           "/" + strings.Repeat("a/", 512) + "b",
	"long segment":       "/" + strings.Repeat("n", store.MaxNameBytes+1),
}

func testFilesBadPaths(t *testing.T, s FilesStore) {
	th := newThread(t, s, ws)
	fsMustWrite(t, s, th.ID, "/etc/passwd", "thread file")
	for _, good := range []string{"/", "/a", "/a b/c.d", "/ünïcödé/名前", "/.hidden", "/a/..b/c..", "/" + strings.Repeat("n", store.MaxNameBytes),
		"/" + strings.Repeat("a/", 511) + "b"} {
		if err := store.CheckPath(good); err != nil {
			t.Errorf("CheckPath(%q) = %v, want nil", good, err)
		}
	}
	for rule, p := range fsBadPaths {
		err := store.CheckPath(p)
		var pe *store.PathError
		if !errors.As(err, &pe) || !errors.Is(err, store.ErrInvalid) || pe.Path != p || pe.Rule == "" {
			t.Errorf("%s: CheckPath(%q) = %v, want a *PathError wrapping ErrInvalid", rule, p, err)
			continue
		}
		if !strings.HasPrefix(err.Error(), "store: path ") {
			t.Errorf("%s: the error %q does not name the path", rule, err)
		}
		ops := map[string]func() error{
			"WriteFile": func() error { _, err := s.WriteFile(ctx, ws, th.ID, p, []byte("x"), store.FileMeta{}); return err },
			"ReadFile":  func() error { _, _, err := s.ReadFile(ctx, ws, th.ID, p); return err },
			"Stat":      func() error { _, err := s.Stat(ctx, ws, th.ID, p); return err },
			"ReadDir":   func() error { _, err := s.ReadDir(ctx, ws, th.ID, p); return err },
			"Remove":    func() error { return s.Remove(ctx, ws, th.ID, p) },
			"Mkdir":     func() error { _, err := s.Mkdir(ctx, ws, th.ID, p); return err },
			"Rmdir":     func() error { return s.Rmdir(ctx, ws, th.ID, p) },
			"Grep":      func() error { _, _, err := s.Grep(ctx, ws, th.ID, p, "x"); return err },
			"Find":      func() error { _, _, err := s.Find(ctx, ws, th.ID, p, "*"); return err },
			"CopyFiles": func() error { _, err := s.CopyFiles(ctx, ws, th.ID, []string{"/etc/passwd", p}, th.ID); return err },
		}
		for name, op := range ops {
			if err := op(); !errors.As(err, &pe) || !errors.Is(err, store.ErrInvalid) {
				t.Errorf("%s: %s(%q) = %v, want a *PathError", rule, name, p, err)
			}
		}
	}
	// Nothing was created, and the thread's own /etc/passwd is untouched.
	got, _, err := s.Find(ctx, ws, th.ID, "/", "")
	if err != nil || !slices.Equal(got, []string{"/etc", "/etc/passwd"}) {
		t.Fatalf("after bad paths the file system holds %q, %v", got, err)
	}
	if data := fsMustRead(t, s, th.ID, "/etc/passwd"); data != "thread file" {
		t.Fatalf("/etc/passwd = %q", data)
	}
}

func testFilesSizeCaps(t *testing.T, s FilesStore) {
	th := newThread(t, s, ws)
	fs := s.WithFileLimits(store.FileLimits{MaxFileBytes: 100, MaxThreadBytes: 250, MaxThreadEntries: 6})
	big := strings.Repeat("b", 101)
	fsMustWrite(t, fs, th.ID, "/a", strings.Repeat("a", 100))
	_, err := fs.WriteFile(ctx, ws, th.ID, "/a", []byte(big), store.FileMeta{})
	fsWantErr(t, "a file over MaxFileBytes", err, store.ErrTooLarge)
	if err != nil && (!strings.Contains(err.Error(), "100 bytes") || !strings.Contains(err.Error(), "101 bytes")) {
		t.Errorf("the error %q does not say the size and the limit", err)
	}
	if got := fsMustRead(t, fs, th.ID, "/a"); got != strings.Repeat("a", 100) {
		t.Fatalf("a refused write changed the file: %q", got)
	}
	_, err = fs.WriteFile(ctx, ws, th.ID, "/new/dir/file", []byte(big), store.FileMeta{})
	fsWantErr(t, "a new file over MaxFileBytes", err, store.ErrTooLarge)
	if _, err := fs.Stat(ctx, ws, th.ID, "/new"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a refused write created its parent: %v", err)
	}
	_, err = fs.AddAttachment(ctx, ws, th.ID, store.NewAttachment{Name: "x.bin", Data: []byte(big)})
	fsWantErr(t, "an attachment over MaxFileBytes", err, store.ErrTooLarge)

	// The thread's total: 100 + 100 fit, 100 more does not.
	fsMustWrite(t, fs, th.ID, "/b", strings.Repeat("b", 100))
	_, err = fs.WriteFile(ctx, ws, th.ID, "/c", []byte(strings.Repeat("c", 100)), store.FileMeta{})
	fsWantErr(t, "a file over MaxThreadBytes", err, store.ErrTooLarge)
	if err != nil && !strings.Contains(err.Error(), "250 bytes") {
		t.Errorf("the error %q does not say the limit", err)
	}
	_, err = fs.Stat(ctx, ws, th.ID, "/c")
	fsWantErr(t, "the refused file", err, store.ErrNotFound)
	fsMustWrite(t, fs, th.ID, "/c", strings.Repeat("c", 50)) // exactly 250
	// Growing a file past the total is refused, and leaves it as it was; shrinking is fine.
	_, err = fs.WriteFile(ctx, ws, th.ID, "/c", []byte(strings.Repeat("C", 51)), store.FileMeta{})
	fsWantErr(t, "growing a file over MaxThreadBytes", err, store.ErrTooLarge)
	if got := fsMustRead(t, fs, th.ID, "/c"); got != strings.Repeat("c", 50) {
		t.Fatalf("a refused write changed the file: %q", got)
	}
	fsMustWrite(t, fs, th.ID, "/a", "small") // 5 + 100 + 50
	fsMustWrite(t, fs, th.ID, "/d", strings.Repeat("d", 95))
	_, err = fs.AddAttachment(ctx, ws, th.ID, store.NewAttachment{Name: "one.txt", Data: []byte("x")})
	fsWantErr(t, "an attachment over MaxThreadBytes", err, store.ErrTooLarge)
	// Removing frees room.
	if err := fs.Remove(ctx, ws, th.ID, "/b"); err != nil {
		t.Fatal(err)
	}
	fsMustWrite(t, fs, th.ID, "/e", strings.Repeat("e", 100))

	// Entries: /a /c /d /e, two more fit (with a new directory), then nothing more.
	if _, err := fs.Mkdir(ctx, ws, th.ID, "/dir"); err != nil {
		t.Fatal(err)
	}
	fsMustWrite(t, fs, th.ID, "/dir/f", "")
	_, err = fs.WriteFile(ctx, ws, th.ID, "/g", nil, store.FileMeta{})
	fsWantErr(t, "a file over MaxThreadEntries", err, store.ErrTooLarge)
	_, err = fs.Mkdir(ctx, ws, th.ID, "/h")
	fsWantErr(t, "a directory over MaxThreadEntries", err, store.ErrTooLarge)
	fsMustWrite(t, fs, th.ID, "/dir/f", "") // replacing needs no new entry
	if err := fs.Remove(ctx, ws, th.ID, "/dir/f"); err != nil {
		t.Fatal(err)
	}
	_, err = fs.WriteFile(ctx, ws, th.ID, "/x/y", nil, store.FileMeta{})
	fsWantErr(t, "a file and its parent over MaxThreadEntries", err, store.ErrTooLarge)
	fsMustWrite(t, fs, th.ID, "/dir/g", "")

	// The caps are per thread.
	other := newThread(t, s, ws)
	fsMustWrite(t, fs, other.ID, "/full", strings.Repeat("o", 100))
	// A lowered cap does not stop a thread over it from cleaning up.
	tiny := s.WithFileLimits(store.FileLimits{MaxThreadBytes: 10, MaxThreadEntries: 1})
	if err := tiny.Remove(ctx, ws, th.ID, "/dir/g"); err != nil {
		t.Fatalf("removing from a thread over its caps: %v", err)
	}
	fsMustWrite(t, tiny, th.ID, "/e", "shrunk")
}

func testFilesDefaultCaps(t *testing.T, s FilesStore) {
	d := store.DefaultFileLimits()
	if d.MaxFileBytes != 32<<20 || d.MaxThreadBytes != 1<<30 {
		t.Fatalf("default caps: %+v, want 32 MiB per file and 1 GiB per thread", d)
	}
	if (store.FileLimits{}).WithDefaults() != d {
		t.Fatal("zero limits do not take the defaults")
	}
	th := newThread(t, s, ws)
	_, err := s.WriteFile(ctx, ws, th.ID, "/huge", make([]byte, 32<<20+1), store.FileMeta{})
	fsWantErr(t, "a file over 32 MiB", err, store.ErrTooLarge)
	if err != nil && !strings.Contains(err.Error(), "32 MiB") {
		t.Errorf("the error %q does not say the limit", err)
	}
}

// testConcurrentCaps: writers racing for the last room of a thread cannot together take it
// over its cap.
func testFilesConcurrentCaps(t *testing.T, s FilesStore) {
	th := newThread(t, s, ws)
	fs := s.WithFileLimits(store.FileLimits{MaxThreadBytes: 1000})
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok, full := 0, 0
	for i := range 20 {
		wg.Go(func() {
			_, err := fs.WriteFile(ctx, ws, th.ID, fmt.Sprintf("/dir%d/f", i%3), nil, store.FileMeta{}) // racing mkdir -p
			if err == nil {
				_, err = fs.WriteFile(ctx, ws, th.ID, fmt.Sprintf("/f%02d", i), bytes.Repeat([]byte{'x'}, 100), store.FileMeta{})
			}
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				ok++
			case errors.Is(err, store.ErrTooLarge):
				full++
			default:
				t.Errorf("write %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if ok != 10 || full != 10 {
		t.Fatalf("%d writes fit and %d were refused, want 10 and 10", ok, full)
	}
	var total int64
	entries, _ := s.ReadDir(ctx, ws, th.ID, "/")
	for _, e := range entries {
		total += e.Size
	}
	if total != 1000 {
		t.Fatalf("the thread holds %d bytes, want 1000", total)
	}
}

var fsAttachmentPath = regexp.MustCompile(`^/attachments/(\d{8}T\d{6}\.\d{3}Z)-[0-9a-z]{13}\.([a-z0-9]+)$`)

func testFilesAttachments(t *testing.T, s FilesStore) {
	th := newThread(t, s, ws)
	before := time.Now().UTC()
	png := []byte("\x89PNG\r\n\x1a\nfake")
	fi := fsMustAttach(t, s, th.ID, store.NewAttachment{Name: "Chart.PNG", MimeType: "image/png", Data: png, Width: 800, Height: 600,
		Description: "sales by month"})
	m := fsAttachmentPath.FindStringSubmatch(fi.Path)
	if m == nil || m[2] != "png" {
		t.Fatalf("attachment path %q does not match %s", fi.Path, fsAttachmentPath)
	}
	at, err := time.Parse("20060102T150405.000Z", m[1])
	if err != nil || at.Before(before.Truncate(time.Millisecond)) || at.After(time.Now().Add(time.Second)) {
		t.Fatalf("the time in %q is not now: %v %v", fi.Path, at, err)
	}
	if fi.Name != store.BaseName(fi.Path) || fi.Size != int64(len(png)) || fi.MimeType != "image/png" || fi.Width != 800 ||
		fi.Height != 600 || fi.Description != "sales by month" || !strings.HasPrefix(fi.ID, store.PrefixFile+"_") {
		t.Fatalf("attachment = %+v", fi)
	}
	data, st, err := s.ReadFile(ctx, ws, th.ID, fi.Path)
	if err != nil || !bytes.Equal(data, png) || st.Width != 800 || st.Height != 600 || st.Description != "sales by month" || st.ID != fi.ID {
		t.Fatalf("ReadFile of the attachment = %q, %+v, %v", data, st, err)
	}
	if dir, err := s.Stat(ctx, ws, th.ID, store.AttachmentsDir); err != nil || !dir.IsDir {
		t.Fatalf("/attachments = %+v, %v", dir, err)
	}
	// The extension comes from the name, else the MIME type, else is bin.
	exts := []struct {
		name, mimeType, data, ext, gotType string
	}{
		{"report.pdf", "application/pdf", "%PDF", "pdf", "application/pdf"},
		{"photo", "image/jpeg", "jpeg", "jpg", "image/jpeg"},
		{"", "application/json", "{}", "json", "application/json"},
		{"data", "", "plain text", "txt", "text/plain; charset=utf-8"},
		{"archive.tar.gz", "", "\x1f\x8b", "gz", "application/gzip"},
		{"odd.ex t", "image/webp", "webp", "webp", "image/webp"},
		{"noext", "application/x-unknown", "?", "bin", "application/x-unknown"},
		{"", "", "\x00\x01", "bin", "application/octet-stream"},
		{"../../etc/passwd", "", "x", "txt", "text/plain; charset=utf-8"},
	}
	seen := map[string]bool{fi.Path: true}
	for _, e := range exts {
		fi := fsMustAttach(t, s, th.ID, store.NewAttachment{Name: e.name, MimeType: e.mimeType, Data: []byte(e.data)})
		m := fsAttachmentPath.FindStringSubmatch(fi.Path)
		if m == nil || m[2] != e.ext || fi.MimeType != e.gotType {
			t.Errorf("attachment %q (%s): path %q, type %q; want extension %s, type %s", e.name, e.mimeType, fi.Path, fi.MimeType, e.ext, e.gotType)
		}
		if seen[fi.Path] {
			t.Errorf("two attachments at %s", fi.Path)
		}
		seen[fi.Path] = true
	}
	// The same name twice: two files.
	a1 := fsMustAttach(t, s, th.ID, store.NewAttachment{Name: "same.txt", Data: []byte("1")})
	a2 := fsMustAttach(t, s, th.ID, store.NewAttachment{Name: "same.txt", Data: []byte("2")})
	if a1.Path == a2.Path || fsMustRead(t, s, th.ID, a1.Path) != "1" || fsMustRead(t, s, th.ID, a2.Path) != "2" {
		t.Fatalf("two attachments of the same name: %s and %s", a1.Path, a2.Path)
	}
	if entries, _ := s.ReadDir(ctx, ws, th.ID, store.AttachmentsDir); len(entries) != len(exts)+3 {
		t.Fatalf("/attachments holds %d files, want %d", len(entries), len(exts)+3)
	}
	_, err = s.AddAttachment(ctx, ws, th.ID, store.NewAttachment{Name: "x.png", MimeType: "not a type", Data: []byte("x")})
	fsWantErr(t, "an attachment with a bad MIME type", err, store.ErrInvalid)
	_, err = s.AddAttachment(ctx, ws, th.ID, store.NewAttachment{Name: "x.png", Width: -3, Data: []byte("x")})
	fsWantErr(t, "an attachment with a negative width", err, store.ErrInvalid)
	// /attachments taken by a file: refused, clearly.
	other := newThread(t, s, ws)
	fsMustWrite(t, s, other.ID, store.AttachmentsDir, "not a directory")
	_, err = s.AddAttachment(ctx, ws, other.ID, store.NewAttachment{Name: "x.png", Data: []byte("x")})
	fsWantErr(t, "an attachment when /attachments is a file", err, store.ErrInvalid)
}

// testReferences: a reference to a stored file (id and path, R5) is resolved by Stat without
// storing anything again, and tells when the file changed since.
func testFilesReferences(t *testing.T, s FilesStore) {
	th := newThread(t, s, ws)
	fi := fsMustAttach(t, s, th.ID, store.NewAttachment{Name: "a.png", MimeType: "image/png", Data: []byte("png"), Width: 2, Height: 3})
	for range 3 {
		st, err := s.Stat(ctx, ws, th.ID, fi.Path)
		if err != nil || st.ID != fi.ID || st.Path != fi.Path || st.Size != 3 || st.MimeType != "image/png" || st.Width != 2 || st.Height != 3 {
			t.Fatalf("resolving the reference: %+v, %v", st, err)
		}
	}
	if entries, _ := s.ReadDir(ctx, ws, th.ID, store.AttachmentsDir); len(entries) != 1 {
		t.Fatalf("resolving references stored %d files", len(entries))
	}
	// A reference to a file written since sees another id.
	fsMustWrite(t, s, th.ID, fi.Path, "changed")
	if st, _ := s.Stat(ctx, ws, th.ID, fi.Path); st.ID == fi.ID {
		t.Fatal("the file changed but kept its id")
	}
	// A reference to a file of another thread does not resolve here.
	other := newThread(t, s, ws)
	_, err := s.Stat(ctx, ws, other.ID, fi.Path)
	fsWantErr(t, "a reference to another thread's file", err, store.ErrNotFound)
}

func testFilesCopyFiles(t *testing.T, s FilesStore) {
	parent := newThread(t, s, ws)
	child := &store.Thread{WorkspaceID: ws, ParentID: parent.ID}
	if err := s.CreateThread(ctx, child); err != nil {
		t.Fatal(err)
	}
	img := fsMustAttach(t, s, child.ID, store.NewAttachment{Name: "plot.png", MimeType: "image/png", Data: []byte("png data"), Width: 10,
		Height: 20, Description: "a plot"})
	fsMustWrite(t, s, child.ID, "/work/notes.md", "# notes")
	// The parent already has an attachment: copies never take its place.
	own := fsMustAttach(t, s, parent.ID, store.NewAttachment{Name: "plot.png", MimeType: "image/png", Data: []byte("parent's own")})

	before := time.Now()
	copies, err := s.CopyFiles(ctx, ws, child.ID, []string{img.Path, "/work/notes.md", img.Path}, parent.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(copies) != 3 || copies[0].Path != copies[2].Path || copies[0].ID != copies[2].ID {
		t.Fatalf("copies = %+v; want three, the first and last the same copy", copies)
	}
	for i, src := range []*store.FileInfo{img, {Path: "/work/notes.md", Name: "notes.md"}} {
		c := copies[i]
		m := fsAttachmentPath.FindStringSubmatch(c.Path)
		if m == nil || "."+m[2] != src.Name[strings.LastIndexByte(src.Name, '.'):] {
			t.Errorf("copy of %s at %q, want /attachments/<time>-<random> with its extension", src.Path, c.Path)
		}
		if c.Path == own.Path || c.ID == src.ID || c.Name != store.BaseName(c.Path) {
			t.Errorf("copy of %s = %+v", src.Path, c)
		}
		if c.ModTime.Before(before.Add(-time.Minute)) {
			t.Errorf("copy of %s has an old ModTime %v", src.Path, c.ModTime)
		}
	}
	c := copies[0]
	if c.Size != img.Size || c.MimeType != "image/png" || c.Width != 10 || c.Height != 20 || c.Description != "a plot" {
		t.Fatalf("the copy lost metadata: %+v", c)
	}
	data, st, err := s.ReadFile(ctx, ws, parent.ID, c.Path)
	if err != nil || string(data) != "png data" || st.ID != c.ID || st.Width != 10 || st.Description != "a plot" {
		t.Fatalf("the copy in the parent: %q %+v %v", data, st, err)
	}
	if got := fsMustRead(t, s, parent.ID, copies[1].Path); got != "# notes" {
		t.Fatalf("second copy = %q", got)
	}
	if got := fsMustRead(t, s, parent.ID, own.Path); got != "parent's own" {
		t.Fatalf("the parent's own attachment = %q", got)
	}
	// The copy is the receiver's own: changing one side leaves the other alone.
	fsMustWrite(t, s, parent.ID, c.Path, "changed in the parent")
	if err := s.Remove(ctx, ws, child.ID, "/work/notes.md"); err != nil {
		t.Fatal(err)
	}
	if got := fsMustRead(t, s, child.ID, img.Path); got != "png data" {
		t.Fatalf("the source changed with its copy: %q", got)
	}
	if got := fsMustRead(t, s, parent.ID, copies[1].Path); got != "# notes" {
		t.Fatalf("the copy changed with its source: %q", got)
	}
	// The copied paths do not exist in the source thread (the paths were rewritten for the
	// receiver), and copying again never collides.
	_, err = s.Stat(ctx, ws, child.ID, c.Path)
	fsWantErr(t, "the copy's path in the source thread", err, store.ErrNotFound)
	again, err := s.CopyFiles(ctx, ws, child.ID, []string{img.Path}, parent.ID)
	if err != nil || again[0].Path == c.Path {
		t.Fatalf("copying again: %+v %v", again, err)
	}
	// Parent to child, and a thread to itself.
	down, err := s.CopyFiles(ctx, ws, parent.ID, []string{own.Path}, child.ID)
	if err != nil || fsMustRead(t, s, child.ID, down[0].Path) != "parent's own" {
		t.Fatalf("copy to the child: %+v %v", down, err)
	}
	self, err := s.CopyFiles(ctx, ws, parent.ID, []string{own.Path}, parent.ID)
	if err != nil || self[0].Path == own.Path || fsMustRead(t, s, parent.ID, self[0].Path) != "parent's own" {
		t.Fatalf("copy to the same thread: %+v %v", self, err)
	}
	if none, err := s.CopyFiles(ctx, ws, parent.ID, nil, child.ID); err != nil || len(none) != 0 {
		t.Fatalf("copying nothing: %+v %v", none, err)
	}
}

func testFilesCopyFilesAtomic(t *testing.T, s FilesStore) {
	from, to := newThread(t, s, ws), newThread(t, s, ws)
	a := fsMustAttach(t, s, from.ID, store.NewAttachment{Name: "a.txt", Data: []byte(strings.Repeat("a", 60))})
	b := fsMustAttach(t, s, from.ID, store.NewAttachment{Name: "b.txt", Data: []byte(strings.Repeat("b", 60))})
	fsMustWrite(t, s, from.ID, "/dir/x", "x")
	count := func() int {
		t.Helper()
		all, _, err := s.Find(ctx, ws, to.ID, "/", "")
		if err != nil {
			t.Fatal(err)
		}
		return len(all)
	}
	_, err := s.CopyFiles(ctx, ws, from.ID, []string{a.Path, "/missing.txt"}, to.ID)
	fsWantErr(t, "copying a missing file", err, store.ErrNotFound)
	_, err = s.CopyFiles(ctx, ws, from.ID, []string{a.Path, "/dir"}, to.ID)
	fsWantErr(t, "copying a directory", err, store.ErrInvalid)
	_, err = s.CopyFiles(ctx, ws, from.ID, []string{a.Path}, "thr_missing")
	fsWantErr(t, "copying to a missing thread", err, store.ErrNotFound)
	_, err = s.CopyFiles(ctx, ws, "thr_missing", []string{a.Path}, to.ID)
	fsWantErr(t, "copying from a missing thread", err, store.ErrNotFound)
	small := s.WithFileLimits(store.FileLimits{MaxThreadBytes: 100})
	_, err = small.CopyFiles(ctx, ws, from.ID, []string{a.Path, b.Path}, to.ID)
	fsWantErr(t, "copies over the receiver's MaxThreadBytes", err, store.ErrTooLarge)
	if n := count(); n != 0 {
		t.Fatalf("failed copies left %d entries in the receiving thread", n)
	}
	if _, err := small.CopyFiles(ctx, ws, from.ID, []string{a.Path}, to.ID); err != nil {
		t.Fatalf("one copy fits: %v", err)
	}
	if n := count(); n != 2 {
		t.Fatalf("the receiving thread has %d entries, want /attachments and the copy", n)
	}
}

func testFilesIsolation(t *testing.T, s FilesStore) {
	mine := newThread(t, s, ws)
	fsMustWrite(t, s, mine.ID, "/secret/plan.txt", "the plan")
	att := fsMustAttach(t, s, mine.ID, store.NewAttachment{Name: "x.png", Data: []byte("png")})
	const other = "wsp_other"
	theirs := newThread(t, s, other)
	checks := map[string]func() error{
		"WriteFile": func() error {
			_, err := s.WriteFile(ctx, other, mine.ID, "/secret/plan.txt", []byte("hijack"), store.FileMeta{})
			return err
		},
		"WriteFile new": func() error {
			_, err := s.WriteFile(ctx, other, mine.ID, "/planted", []byte("x"), store.FileMeta{})
			return err
		},
		"ReadFile":  func() error { _, _, err := s.ReadFile(ctx, other, mine.ID, "/secret/plan.txt"); return err },
		"Stat":      func() error { _, err := s.Stat(ctx, other, mine.ID, "/secret/plan.txt"); return err },
		"Stat root": func() error { _, err := s.Stat(ctx, other, mine.ID, "/"); return err },
		"ReadDir":   func() error { _, err := s.ReadDir(ctx, other, mine.ID, "/"); return err },
		"Remove":    func() error { return s.Remove(ctx, other, mine.ID, "/secret/plan.txt") },
		"Mkdir":     func() error { _, err := s.Mkdir(ctx, other, mine.ID, "/planted"); return err },
		"Rmdir":     func() error { return s.Rmdir(ctx, other, mine.ID, "/secret") },
		"Grep":      func() error { _, _, err := s.Grep(ctx, other, mine.ID, "/", "plan"); return err },
		"Find":      func() error { _, _, err := s.Find(ctx, other, mine.ID, "/", "*"); return err },
		"AddAttachment": func() error {
			_, err := s.AddAttachment(ctx, other, mine.ID, store.NewAttachment{Data: []byte("x")})
			return err
		},
		"CopyFiles out": func() error {
			_, err := s.CopyFiles(ctx, other, mine.ID, []string{"/secret/plan.txt"}, theirs.ID)
			return err
		},
		"CopyFiles out, named by the owner's workspace": func() error {
			_, err := s.CopyFiles(ctx, ws, mine.ID, []string{"/secret/plan.txt"}, theirs.ID)
			return err
		},
		"CopyFiles in": func() error {
			_, err := s.CopyFiles(ctx, other, theirs.ID, nil, mine.ID)
			return err
		},
	}
	if _, err := s.WriteFile(ctx, other, theirs.ID, "/x", []byte("x"), store.FileMeta{}); err != nil {
		t.Fatal(err)
	}
	for name, check := range checks {
		if err := check(); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s from another workspace: %v, want ErrNotFound", name, err)
		}
	}
	got, _, err := s.Find(ctx, ws, mine.ID, "/", "")
	if err != nil || !slices.Equal(got, []string{"/attachments", att.Path, "/secret", "/secret/plan.txt"}) {
		t.Fatalf("the owner's files changed: %q %v", got, err)
	}
	if data := fsMustRead(t, s, mine.ID, "/secret/plan.txt"); data != "the plan" {
		t.Fatalf("the owner's file changed: %q", data)
	}
	if got, _, _ := s.Find(ctx, other, theirs.ID, "/", ""); !slices.Equal(got, []string{"/x"}) {
		t.Fatalf("the other workspace's thread holds %q", got)
	}
}

func testFilesMissingThread(t *testing.T, s FilesStore) {
	const missing = "thr_missing"
	checks := map[string]func() error{
		"WriteFile": func() error { _, err := s.WriteFile(ctx, ws, missing, "/a", []byte("x"), store.FileMeta{}); return err },
		"ReadFile":  func() error { _, _, err := s.ReadFile(ctx, ws, missing, "/a"); return err },
		"Stat":      func() error { _, err := s.Stat(ctx, ws, missing, "/a"); return err },
		"Stat root": func() error { _, err := s.Stat(ctx, ws, missing, "/"); return err },
		"ReadDir":   func() error { _, err := s.ReadDir(ctx, ws, missing, "/"); return err },
		"Remove":    func() error { return s.Remove(ctx, ws, missing, "/a") },
		"Mkdir":     func() error { _, err := s.Mkdir(ctx, ws, missing, "/a"); return err },
		"Rmdir":     func() error { return s.Rmdir(ctx, ws, missing, "/a") },
		"Grep":      func() error { _, _, err := s.Grep(ctx, ws, missing, "/", "x"); return err },
		"Find":      func() error { _, _, err := s.Find(ctx, ws, missing, "/", "*"); return err },
		"AddAttachment": func() error {
			_, err := s.AddAttachment(ctx, ws, missing, store.NewAttachment{Data: []byte("x")})
			return err
		},
		"CopyFiles": func() error { _, err := s.CopyFiles(ctx, ws, missing, nil, missing); return err },
	}
	for name, check := range checks {
		if err := check(); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s on a missing thread: %v, want ErrNotFound", name, err)
		}
	}
}

// testConcurrentWriters: writers racing on one path leave one writer's content whole, and
// readers meanwhile see whole contents only.
func testFilesConcurrentWriters(t *testing.T, s FilesStore) {
	th := newThread(t, s, ws)
	const writers, rounds = 8, 5
	content := func(w int) []byte { return bytes.Repeat([]byte{byte('a' + w)}, 1000*(w+1)) }
	whole := func(data []byte) bool {
		return len(data) > 0 && len(data) == 1000*int(data[0]-'a'+1) && bytes.Count(data, data[:1]) == len(data)
	}
	fsMustWrite(t, s, th.ID, "/shared/file", "a")
	var wg sync.WaitGroup
	done := make(chan struct{})
	var readErr error
	var readWG sync.WaitGroup
	readWG.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			data, fi, err := s.ReadFile(ctx, ws, th.ID, "/shared/file")
			if err != nil {
				readErr = err
				return
			}
			if len(data) > 1 && (!whole(data) || fi.Size != int64(len(data))) {
				readErr = fmt.Errorf("read a mix: %d bytes starting %q, size %d", len(data), data[:1], fi.Size)
				return
			}
		}
	})
	for w := range writers {
		wg.Go(func() {
			for range rounds {
				if _, err := s.WriteFile(ctx, ws, th.ID, "/shared/file", content(w), store.FileMeta{}); err != nil {
					t.Errorf("writer %d: %v", w, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(done)
	readWG.Wait()
	if readErr != nil {
		t.Fatal(readErr)
	}
	data, fi, err := s.ReadFile(ctx, ws, th.ID, "/shared/file")
	if err != nil || !whole(data) || fi.Size != int64(len(data)) {
		t.Fatalf("after the race: %d bytes, %+v, %v", len(data), fi, err)
	}
	if entries, _ := s.ReadDir(ctx, ws, th.ID, "/shared"); len(entries) != 1 {
		t.Fatalf("the race left %d entries", len(entries))
	}
}

func testFilesBinaryRoundTrip(t *testing.T, s FilesStore) {
	th := newThread(t, s, ws)
	all := make([]byte, 0, 512)
	for i := range 256 {
		all = append(all, byte(i))
	}
	for i := range 256 {
		all = append(all, byte(255-i))
	}
	fi, err := s.WriteFile(ctx, ws, th.ID, "/bin/all", all, store.FileMeta{})
	if err != nil {
		t.Fatal(err)
	}
	if fi.MimeType != "application/octet-stream" || fi.Size != 512 {
		t.Fatalf("binary file: %+v", fi)
	}
	data, _, err := s.ReadFile(ctx, ws, th.ID, "/bin/all")
	if err != nil || !bytes.Equal(data, all) {
		t.Fatalf("binary round trip: %v, equal %v", err, bytes.Equal(data, all))
	}
	att := fsMustAttach(t, s, th.ID, store.NewAttachment{Name: "all.bin", Data: all})
	if data := fsMustRead(t, s, th.ID, att.Path); data != string(all) {
		t.Fatal("binary attachment round trip")
	}
	copies, err := s.CopyFiles(ctx, ws, th.ID, []string{att.Path}, th.ID)
	if err != nil || fsMustRead(t, s, th.ID, copies[0].Path) != string(all) {
		t.Fatalf("binary copy round trip: %v", err)
	}
	// Invalid UTF-8 in a text file round-trips too, and grep shows it replaced.
	fsMustWrite(t, s, th.ID, "/latin1.txt", "caf\xe9 au lait\n")
	if got := fsMustRead(t, s, th.ID, "/latin1.txt"); got != "caf\xe9 au lait\n" {
		t.Fatalf("latin-1 text = %q", got)
	}
	m, _, err := s.Grep(ctx, ws, th.ID, "/latin1.txt", "lait")
	if err != nil || len(m) != 1 || m[0].Text != "caf\uFFFD au lait" {
		t.Fatalf("grep of latin-1 text = %+v, %v", m, err)
	}
	// Binary files are not searched.
	if m, _, err := s.Grep(ctx, ws, th.ID, "/bin", "."); err != nil || len(m) != 0 {
		t.Fatalf("grep of a binary file = %+v, %v", m, err)
	}
}

// testFilesUsageExact: after every kind of change, refused ones included, the caps see exactly
// what the thread holds: a cap set to the current total lets nothing grow past it.
func testFilesUsageExact(t *testing.T, s FilesStore) {
	th := newThread(t, s, ws)
	other := newThread(t, s, ws)
	capped := s.WithFileLimits(store.FileLimits{MaxFileBytes: 1000, MaxThreadBytes: 2000}) // the thread will hold 1714 bytes
	fsMustWrite(t, s, th.ID, "/a/b/c.txt", strings.Repeat("c", 300))
	fsMustWrite(t, s, th.ID, "/a/b/c.txt", strings.Repeat("c", 120)) // shrink
	fsMustWrite(t, s, th.ID, "/a/d.txt", strings.Repeat("d", 700))
	fsMustWrite(t, s, th.ID, "/a/d.txt", strings.Repeat("d", 900)) // grow
	fsMustWrite(t, s, th.ID, "/gone.txt", strings.Repeat("g", 333))
	if err := s.Remove(ctx, ws, th.ID, "/gone.txt"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Mkdir(ctx, ws, th.ID, "/m/n/o"); err != nil {
		t.Fatal(err)
	}
	if err := s.Rmdir(ctx, ws, th.ID, "/m/n/o"); err != nil {
		t.Fatal(err)
	}
	att := fsMustAttach(t, s, th.ID, store.NewAttachment{Name: "x.png", Data: make([]byte, 250)})
	fsMustWrite(t, s, other.ID, "/src.bin", strings.Repeat("s", 444))
	if _, err := s.CopyFiles(ctx, ws, other.ID, []string{"/src.bin", "/src.bin"}, th.ID); err != nil {
		t.Fatal(err)
	}
	// Refused changes count for nothing.
	_, err := capped.WriteFile(ctx, ws, th.ID, "/a/d.txt", make([]byte, 1001), store.FileMeta{})
	fsWantErr(t, "a write over the file cap", err, store.ErrTooLarge)
	_, err = capped.WriteFile(ctx, ws, th.ID, "/big/new.txt", make([]byte, 999), store.FileMeta{})
	fsWantErr(t, "a new file over the thread cap", err, store.ErrTooLarge)
	_, err = s.WriteFile(ctx, ws, th.ID, "/a/d.txt/x", []byte("x"), store.FileMeta{})
	fsWantErr(t, "a write under a file", err, store.ErrInvalid)
	fsWantErr(t, "a removal of a directory that is not empty", s.Rmdir(ctx, ws, th.ID, "/a"), store.ErrInvalid)
	_, err = s.CopyFiles(ctx, ws, other.ID, []string{"/src.bin", "/missing"}, th.ID)
	fsWantErr(t, "a copy of a missing file", err, store.ErrNotFound)
	fsMustWrite(t, s, th.ID, att.Path, "") // an attachment emptied

	all, _, err := s.Find(ctx, ws, th.ID, "/", "")
	if err != nil {
		t.Fatal(err)
	}
	var bytes int64
	for _, p := range all {
		fi, err := s.Stat(ctx, ws, th.ID, p)
		if err != nil {
			t.Fatal(err)
		}
		bytes += fi.Size
	}
	if want := int64(120 + 900 + 0 + 444); bytes != want {
		t.Fatalf("the thread holds %d bytes, want %d", bytes, want)
	}
	exact := s.WithFileLimits(store.FileLimits{MaxThreadBytes: bytes, MaxThreadEntries: int64(len(all)) + 1})
	_, err = exact.WriteFile(ctx, ws, th.ID, "/one-byte-more", []byte("x"), store.FileMeta{})
	fsWantErr(t, "one byte over the exact total", err, store.ErrTooLarge)
	fsMustWrite(t, exact, th.ID, "/empty", "")
	_, err = exact.WriteFile(ctx, ws, th.ID, "/one-entry-more", nil, store.FileMeta{})
	fsWantErr(t, "one entry over the exact count", err, store.ErrTooLarge)
	fsMustWrite(t, exact, th.ID, "/a/d.txt", strings.Repeat("D", 900)) // same size: fits
}

func testFilesPathHelpers(t *testing.T, _ FilesStore) {
	for _, tt := range []struct{ p, parent, base string }{{"/", "/", "/"}, {"/a", "/", "a"}, {"/a/b.txt", "/a", "b.txt"}, {"/a/b/c", "/a/b", "c"}} {
		if got := store.ParentDir(tt.p); got != tt.parent {
			t.Errorf("ParentDir(%q) = %q, want %q", tt.p, got, tt.parent)
		}
		if got := store.BaseName(tt.p); got != tt.base {
			t.Errorf("BaseName(%q) = %q, want %q", tt.p, got, tt.base)
		}
	}
	if got := store.Ancestors("/a/b/c"); !slices.Equal(got, []string{"/a", "/a/b"}) {
		t.Errorf("Ancestors(/a/b/c) = %q", got)
	}
	if got := store.Ancestors("/a"); len(got) != 0 {
		t.Errorf("Ancestors(/a) = %q", got)
	}
	for _, tt := range []struct {
		p, dir string
		in     bool
	}{{"/a/b", "/a", true}, {"/a", "/a", true}, {"/ab", "/a", false}, {"/a", "/", true}, {"/", "/a", false}, {"/a.b/c", "/a", false}} {
		if got := store.InDir(tt.p, tt.dir); got != tt.in {
			t.Errorf("InDir(%q, %q) = %v", tt.p, tt.dir, got)
		}
	}
	// A long path's error is shortened, without splitting a character.
	err := store.CheckPath("/" + strings.Repeat("é", 600))
	if err == nil || len(err.Error()) > 300 || !strings.Contains(err.Error(), "1201 bytes") || strings.Contains(err.Error(), "\\x") {
		t.Errorf("long path error: %v", err)
	}
}
