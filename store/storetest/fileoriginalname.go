package storetest

import (
	"testing"

	"github.com/quiverhq/quiver/store"
)

// testFilesOriginalName (issue 49): an attachment keeps the name the tool gave it, as its
// OriginalName, wherever the file is described (the attachment added, Stat, ReadFile,
// ReadDir, its copies), while its path stays one of the store's making: two attachments of
// one name are two files. A file written over loses it; a name that is not a file name is
// refused where a writer gives it.
func testFilesOriginalName(t *testing.T, s FilesStore) {
	th := newThread(t, s, ws)
	names := []struct{ given, kept string }{
		{"chart.png", "chart.png"},
		{"Quarterly report (final).PDF", "Quarterly report (final).PDF"},
		{"график.svg", "график.svg"},
		{"../../etc/passwd", "passwd"},
		{`C:\Users\me\notes.txt`, "notes.txt"},
		{"..", ""},
		{"", ""},
	}
	for _, n := range names {
		fi := fsMustAttach(t, s, th.ID, store.NewAttachment{Name: n.given, Data: []byte("x")})
		if fsAttachmentPath.FindStringSubmatch(fi.Path) == nil || fi.Name != store.BaseName(fi.Path) {
			t.Errorf("attachment %q stored at %q named %q: want a path of the store's making", n.given, fi.Path, fi.Name)
		}
		want := n.kept
		if want == "" {
			want = fi.Name
		}
		if fi.OriginalName != n.kept || fi.DisplayName() != want {
			t.Errorf("attachment %q: original name %q, display name %q; want %q, %q", n.given, fi.OriginalName, fi.DisplayName(), n.kept, want)
		}
		st, err := s.Stat(ctx, ws, th.ID, fi.Path)
		if err != nil || st.OriginalName != n.kept {
			t.Errorf("Stat of attachment %q: %+v, %v", n.given, st, err)
		}
		if _, rd, err := s.ReadFile(ctx, ws, th.ID, fi.Path); err != nil || rd.OriginalName != n.kept {
			t.Errorf("ReadFile of attachment %q: %+v, %v", n.given, rd, err)
		}
	}
	// The same name twice: two files, each with the name.
	a1 := fsMustAttach(t, s, th.ID, store.NewAttachment{Name: "chart.png", Data: []byte("1")})
	if entries, err := s.ReadDir(ctx, ws, th.ID, store.AttachmentsDir); err != nil {
		t.Fatal(err)
	} else {
		charts := 0
		for _, e := range entries {
			if e.OriginalName == "chart.png" {
				charts++
			}
		}
		if charts != 2 || len(entries) != len(names)+1 {
			t.Errorf("ReadDir lists %d files, %d named chart.png; want %d, 2", len(entries), charts, len(names)+1)
		}
	}
	// Copies keep the name, and a copied file of the writer's naming gets its own.
	fsMustWrite(t, s, th.ID, "/work/summary.md", "# summary")
	other := newThread(t, s, ws)
	copies, err := s.CopyFiles(ctx, ws, th.ID, []string{a1.Path, "/work/summary.md"}, other.ID)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"chart.png", "summary.md"} {
		c := copies[i]
		st, err := s.Stat(ctx, ws, other.ID, c.Path)
		if c.OriginalName != want || err != nil || st.OriginalName != want || c.Path == a1.Path && i == 0 {
			t.Errorf("copy %d: %+v (stat %+v, %v); want the original name %q", i, c, st, err, want)
		}
	}
	// A file written over is another file: the name it came with goes.
	w := fsMustWrite(t, s, th.ID, a1.Path, "redrawn")
	if st, _ := s.Stat(ctx, ws, th.ID, a1.Path); w.OriginalName != "" || st.OriginalName != "" {
		t.Errorf("written over, the file keeps the original name: %+v, %+v", w, st)
	}
	if fi := fsMustWrite(t, s, th.ID, "/work/plain.txt", "x"); fi.OriginalName != "" || fi.DisplayName() != "plain.txt" {
		t.Errorf("a written file: %+v", fi)
	}
	// A writer giving a name that is not a file name is refused, and nothing is written.
	for _, bad := range []string{"a/b.txt", `a\b.txt`, "nul\x00.txt", "\xff.txt", string(make([]byte, store.MaxNameBytes+1))} {
		_, err := s.WriteFile(ctx, ws, th.ID, "/work/bad.txt", []byte("x"), store.FileMeta{OriginalName: bad})
		fsWantErr(t, "original name "+bad[:min(len(bad), 12)], err, store.ErrInvalid)
	}
	if _, err := s.Stat(ctx, ws, th.ID, "/work/bad.txt"); err == nil {
		t.Error("a refused write left a file")
	}
	if fi, err := s.WriteFile(ctx, ws, th.ID, "/work/named.txt", []byte("x"), store.FileMeta{OriginalName: "named by hand.txt"}); err != nil ||
		fi.OriginalName != "named by hand.txt" {
		t.Errorf("a writer's original name: %+v, %v", fi, err)
	}
}
