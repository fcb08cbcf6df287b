package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/quiverhq/quiver/store"
)

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
