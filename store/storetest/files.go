package storetest

import (
	"bytes"
	"errors"
	"fmt"
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
		{"OriginalName", testFilesOriginalName},
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
