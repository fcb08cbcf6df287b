package storetest

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/quiverhq/quiver/store"
)

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

// testReferences: a reference to a stored file (its id and path) is resolved by Stat without
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
