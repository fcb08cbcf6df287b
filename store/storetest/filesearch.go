package storetest

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/quiverhq/quiver/store"
)

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
