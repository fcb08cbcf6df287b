package storetest

import (
	"errors"
	"slices"
	"testing"

	"github.com/quiverhq/quiver/store"
)

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
