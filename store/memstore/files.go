package memstore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/quiverhq/quiver/internal/stamp"
	"github.com/quiverhq/quiver/store"
)

// fileTree is a thread's file system. The root "/" always exists and has no entry.
type fileTree struct {
	entries map[string]*fileEntry            // by path
	dirs    map[string]map[string]*fileEntry // each directory's entries by name, the root's too
	bytes   int64                            // the files' sizes, which the caps count,
	count   int64                            // and the entries
}

// fileEntry is a file or a directory. An entry is never changed once stored (a write stores a
// new one), so its data may be shared by copies and read once the store is unlocked.
type fileEntry struct {
	info store.FileInfo
	data []byte // a file's content, never nil; nil for a directory
}

func (e *fileEntry) describe() *store.FileInfo {
	c := e.info
	return &c
}

func (r *threadRec) tree() *fileTree {
	if r.files == nil {
		r.files = &fileTree{entries: map[string]*fileEntry{}, dirs: map[string]map[string]*fileEntry{"/": {}}}
	}
	return r.files
}

func rootInfo() *store.FileInfo { return &store.FileInfo{Path: "/", Name: "/", IsDir: true} }

// stat describes the entry at p, the root included, or returns nil when there is none.
func (t *fileTree) stat(p string) *store.FileInfo {
	if p == "/" {
		return rootInfo()
	}
	if e := t.entries[p]; e != nil {
		return e.describe()
	}
	return nil
}

// put stores e where nothing is, in its directory, which exists.
func (t *fileTree) put(e *fileEntry) {
	p := e.info.Path
	t.entries[p] = e
	t.dirs[store.ParentDir(p)][e.info.Name] = e
	if e.info.IsDir {
		t.dirs[p] = map[string]*fileEntry{}
	}
	t.bytes += e.info.Size
	t.count++
}

// drop removes the entry at p: a file or an empty directory.
func (t *fileTree) drop(p string) {
	e := t.entries[p]
	delete(t.entries, p)
	delete(t.dirs[store.ParentDir(p)], e.info.Name)
	delete(t.dirs, p)
	t.bytes -= e.info.Size
	t.count--
}

// missingDirs returns the directories of dirs (top down) that do not exist, or
// store.ErrInvalid when one of them is a file.
func (t *fileTree) missingDirs(op threadOp, dirs []string) ([]string, error) {
	var out []string
	for _, d := range dirs {
		switch e := t.entries[d]; {
		case e == nil:
			out = append(out, d)
		case !e.info.IsDir:
			return nil, op.failf(store.ErrInvalid, "%s is a file, not a directory", d)
		}
	}
	return out, nil
}

// mkdirs creates the directories dirs (top down, none existing).
func (t *fileTree) mkdirs(ctx context.Context, dirs []string, now time.Time) {
	for _, d := range dirs {
		t.put(&fileEntry{info: store.FileInfo{ID: stamp.ID(ctx, store.PrefixFile), Path: d, Name: store.BaseName(d), IsDir: true, ModTime: now}})
	}
}

// subtree returns the entries under the directory root (root excluded), in path order: byte
// order of the whole path, which is not the order of a walk ("/a-b" comes before "/a/b").
func (t *fileTree) subtree(root string) []*fileEntry {
	var out []*fileEntry
	var walk func(dir string)
	walk = func(dir string) {
		for _, e := range t.dirs[dir] {
			out = append(out, e)
			if e.info.IsDir {
				walk(e.info.Path)
			}
		}
	}
	walk(root)
	slices.SortFunc(out, func(a, b *fileEntry) int { return strings.Compare(a.info.Path, b.info.Path) })
	return out
}

// newFile is a file about to be stored at p.
func newFile(ctx context.Context, p string, data []byte, meta store.FileMeta, now time.Time) *fileEntry {
	return &fileEntry{data: data, info: store.FileInfo{ID: stamp.ID(ctx, store.PrefixFile), Path: p, Name: store.BaseName(p),
		Size: int64(len(data)), MimeType: meta.MimeType, Width: meta.Width, Height: meta.Height, Description: meta.Description,
		OriginalName: meta.OriginalName, ModTime: now}}
}

// freshAttachmentPath returns p, or another attachment path when p is taken (which 64 random
// bits make all but impossible).
func freshAttachmentPath(ctx context.Context, op threadOp, p, name, mimeType string, now time.Time, taken func(string) bool) (string, error) {
	for range 8 {
		if !taken(p) {
			return p, nil
		}
		p = store.AttachmentPath(ctx, name, mimeType, now)
	}
	return "", op.failf(store.ErrExists, "no free attachment name found")
}

// fileView is the thread file system under caps: the Store's own (the defaults), or another
// that WithFileLimits returns. Its methods are the Store's Files methods.
type fileView struct {
	s   *Store
	lim store.FileLimits
}

var _ store.Files = fileView{}

// WithFileLimits returns the store's file system under other caps than the defaults; zero
// fields of l keep their default. It reads and changes the same files.
func (s *Store) WithFileLimits(l store.FileLimits) store.Files { return fileView{s, l.WithDefaults()} }

func (s *Store) fs() fileView { return fileView{s, store.DefaultFileLimits()} }

// with runs fn on the thread's file system, with the store locked, once the thread is found
// in the workspace.
func (f fileView) with(op threadOp, workspaceID, threadID string, fn func(t *fileTree) error) error {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	rec, err := f.s.th.thread(op, workspaceID, threadID)
	if err != nil {
		return err
	}
	return fn(rec.tree())
}

// room refuses a change of the thread's files by addBytes and addEntries over a cap.
func (f fileView) room(t *fileTree, threadID string, addBytes, addEntries int64) error {
	return f.lim.CheckUsage(threadID, t.bytes+addBytes, t.count+addEntries, addBytes, addEntries)
}

// WriteFile implements store.Files.WriteFile.
func (f fileView) WriteFile(ctx context.Context, workspaceID, threadID, p string, data []byte, meta store.FileMeta) (*store.FileInfo, error) {
	op := threadOp("write " + p)
	meta, err := store.PrepareWrite(f.lim, p, data, meta)
	if err != nil {
		return nil, err
	}
	data = append([]byte{}, data...)
	var out *store.FileInfo
	err = f.with(op, workspaceID, threadID, func(t *fileTree) error {
		now, size := stamp.Now(ctx), int64(len(data))
		if old := t.entries[p]; old != nil {
			if old.info.IsDir {
				return op.failf(store.ErrInvalid, "it is a directory")
			}
			if err := f.room(t, threadID, size-old.info.Size, 0); err != nil {
				return err
			}
			t.drop(p)
		} else {
			dirs, err := t.missingDirs(op, store.Ancestors(p))
			if err != nil {
				return err
			}
			if err := f.room(t, threadID, size, int64(len(dirs))+1); err != nil {
				return err
			}
			t.mkdirs(ctx, dirs, now)
		}
		e := newFile(ctx, p, data, meta, now)
		t.put(e)
		out = e.describe()
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ReadFile implements store.Files.ReadFile.
func (f fileView) ReadFile(ctx context.Context, workspaceID, threadID, p string) ([]byte, *store.FileInfo, error) {
	op := threadOp("read " + p)
	if err := store.CheckPath(p); err != nil {
		return nil, nil, err
	}
	var e *fileEntry
	err := f.with(op, workspaceID, threadID, func(t *fileTree) error {
		if e = t.entries[p]; e == nil && p != "/" {
			return op.failf(store.ErrNotFound, "no file or directory %s", p)
		}
		if e == nil || e.info.IsDir {
			return op.failf(store.ErrInvalid, "it is a directory")
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return append([]byte{}, e.data...), e.describe(), nil
}

// Stat implements store.Files.Stat.
func (f fileView) Stat(ctx context.Context, workspaceID, threadID, p string) (*store.FileInfo, error) {
	op := threadOp("stat " + p)
	if err := store.CheckPath(p); err != nil {
		return nil, err
	}
	var out *store.FileInfo
	err := f.with(op, workspaceID, threadID, func(t *fileTree) error {
		if out = t.stat(p); out == nil {
			return op.failf(store.ErrNotFound, "no file or directory %s", p)
		}
		return nil
	})
	return out, err
}

// ReadDir implements store.Files.ReadDir.
func (f fileView) ReadDir(ctx context.Context, workspaceID, threadID, p string) ([]*store.FileInfo, error) {
	op := threadOp("read directory " + p)
	if err := store.CheckPath(p); err != nil {
		return nil, err
	}
	out := []*store.FileInfo{}
	err := f.with(op, workspaceID, threadID, func(t *fileTree) error {
		switch dir := t.stat(p); {
		case dir == nil:
			return op.failf(store.ErrNotFound, "no file or directory %s", p)
		case !dir.IsDir:
			return op.failf(store.ErrInvalid, "it is a file, not a directory")
		}
		for _, e := range t.dirs[p] {
			out = append(out, e.describe())
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b *store.FileInfo) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Remove implements store.Files.Remove.
func (f fileView) Remove(ctx context.Context, workspaceID, threadID, p string) error {
	op := threadOp("remove " + p)
	if err := store.CheckPath(p); err != nil {
		return err
	}
	return f.with(op, workspaceID, threadID, func(t *fileTree) error {
		switch fi := t.stat(p); {
		case fi == nil:
			return op.failf(store.ErrNotFound, "no file or directory %s", p)
		case fi.IsDir:
			return op.failf(store.ErrInvalid, "it is a directory (remove it with Rmdir)")
		}
		t.drop(p) // frees room: always allowed
		return nil
	})
}

// Mkdir implements store.Files.Mkdir.
func (f fileView) Mkdir(ctx context.Context, workspaceID, threadID, p string) (*store.FileInfo, error) {
	op := threadOp("make directory " + p)
	if err := store.CheckPath(p); err != nil {
		return nil, err
	}
	var out *store.FileInfo
	err := f.with(op, workspaceID, threadID, func(t *fileTree) error {
		switch old := t.stat(p); {
		case p == "/":
			return op.failf(store.ErrExists, "the root directory always exists")
		case old != nil && old.IsDir:
			return op.failf(store.ErrExists, "the directory exists")
		case old != nil:
			return op.failf(store.ErrExists, "a file exists there")
		}
		dirs, err := t.missingDirs(op, store.Ancestors(p))
		if err != nil {
			return err
		}
		dirs = append(dirs, p)
		if err := f.room(t, threadID, 0, int64(len(dirs))); err != nil {
			return err
		}
		t.mkdirs(ctx, dirs, stamp.Now(ctx))
		out = t.stat(p)
		return nil
	})
	return out, err
}

// Rmdir implements store.Files.Rmdir.
func (f fileView) Rmdir(ctx context.Context, workspaceID, threadID, p string) error {
	op := threadOp("remove directory " + p)
	if err := store.CheckPath(p); err != nil {
		return err
	}
	return f.with(op, workspaceID, threadID, func(t *fileTree) error {
		switch fi := t.stat(p); {
		case p == "/":
			return op.failf(store.ErrInvalid, "the root directory cannot be removed")
		case fi == nil:
			return op.failf(store.ErrNotFound, "no file or directory %s", p)
		case !fi.IsDir:
			return op.failf(store.ErrInvalid, "it is a file (remove it with Remove)")
		case len(t.dirs[p]) > 0:
			return op.failf(store.ErrInvalid, "the directory is not empty")
		}
		t.drop(p)
		return nil
	})
}

// Grep implements store.Files.Grep. The files are searched once the store is unlocked: their
// entries do not change.
func (f fileView) Grep(ctx context.Context, workspaceID, threadID, root, pattern string) ([]store.GrepMatch, bool, error) {
	op := threadOp("grep " + root)
	if err := store.CheckPath(root); err != nil {
		return nil, false, err
	}
	g, err := store.NewGrepSearch(pattern, f.lim)
	if err != nil {
		return nil, false, err
	}
	var files []*fileEntry
	err = f.with(op, workspaceID, threadID, func(t *fileTree) error {
		files, err = t.filesUnder(op, root)
		return err
	})
	if err != nil {
		return nil, false, err
	}
	for _, e := range files {
		if !g.Admit(e.info.Size) || !g.Scan(e.info.Path, e.data) {
			break
		}
	}
	matches, truncated := g.Result()
	return matches, truncated, nil
}

// filesUnder are the files under root, or root itself when it is a file.
func (t *fileTree) filesUnder(op threadOp, root string) ([]*fileEntry, error) {
	top := t.stat(root)
	switch {
	case top == nil:
		return nil, op.failf(store.ErrNotFound, "no file or directory %s", root)
	case !top.IsDir:
		return []*fileEntry{t.entries[root]}, nil
	}
	var files []*fileEntry
	for _, e := range t.subtree(root) {
		if !e.info.IsDir {
			files = append(files, e)
		}
	}
	return files, nil
}

// Find implements store.Files.Find.
func (f fileView) Find(ctx context.Context, workspaceID, threadID, root, pattern string) ([]string, bool, error) {
	op := threadOp("find in " + root)
	if err := store.CheckPath(root); err != nil {
		return nil, false, err
	}
	search, err := store.NewFindSearch(root, pattern, f.lim)
	if err != nil {
		return nil, false, err
	}
	var entries []*fileEntry
	err = f.with(op, workspaceID, threadID, func(t *fileTree) error {
		switch top := t.stat(root); {
		case top == nil:
			return op.failf(store.ErrNotFound, "no file or directory %s", root)
		case !top.IsDir:
			return op.failf(store.ErrInvalid, "it is a file, not a directory")
		}
		entries = t.subtree(root)
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	for _, e := range entries {
		if !search.Add(e.info.Path) {
			break
		}
	}
	paths, truncated := search.Result()
	return paths, truncated, nil
}

// AddAttachment implements store.Files.AddAttachment.
func (f fileView) AddAttachment(ctx context.Context, workspaceID, threadID string, a store.NewAttachment) (*store.FileInfo, error) {
	const op threadOp = "add attachment"
	now := stamp.Now(ctx)
	p, meta, err := store.PrepareAttachment(ctx, f.lim, a, now)
	if err != nil {
		return nil, err
	}
	data := append([]byte{}, a.Data...)
	var out *store.FileInfo
	err = f.with(op, workspaceID, threadID, func(t *fileTree) error {
		dirs, err := t.missingDirs(op, []string{store.AttachmentsDir})
		if err != nil {
			return err
		}
		if err := f.room(t, threadID, int64(len(data)), int64(len(dirs))+1); err != nil {
			return err
		}
		at, err := freshAttachmentPath(ctx, op, p, a.Name, meta.MimeType, now, func(q string) bool { return t.entries[q] != nil })
		if err != nil {
			return err
		}
		t.mkdirs(ctx, dirs, now)
		e := newFile(ctx, at, data, meta, now)
		t.put(e)
		out = e.describe()
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// CopyFiles implements store.Files.CopyFiles. A copy shares its source's content, which
// neither changes.
func (f fileView) CopyFiles(ctx context.Context, workspaceID, fromThreadID string, paths []string, toThreadID string) ([]*store.FileInfo, error) {
	op := threadOp(fmt.Sprintf("copy files from thread %s to thread %s", fromThreadID, toThreadID))
	var unique []string
	for _, p := range paths {
		if err := store.CheckPath(p); err != nil {
			return nil, err
		}
		if p == "/" {
			return nil, op.failf(store.ErrInvalid, "/ is a directory")
		}
		if !slices.Contains(unique, p) {
			unique = append(unique, p)
		}
	}
	copies := map[string]*store.FileInfo{}
	err := f.with(op, workspaceID, toThreadID, func(dst *fileTree) error {
		from, err := f.s.th.thread(op, workspaceID, fromThreadID)
		if err != nil {
			return err
		}
		srcs, err := f.sources(op, from.tree(), unique)
		if err != nil || len(srcs) == 0 {
			return err
		}
		return f.copyInto(ctx, op, dst, toThreadID, srcs, copies)
	})
	if err != nil {
		return nil, err
	}
	out := make([]*store.FileInfo, len(paths))
	for i, p := range paths {
		c := *copies[p]
		out[i] = &c
	}
	return out, nil
}

// sources returns the files at paths of t, which CopyFiles copies.
func (f fileView) sources(op threadOp, t *fileTree, paths []string) ([]*fileEntry, error) {
	srcs := make([]*fileEntry, 0, len(paths))
	for _, p := range paths {
		e := t.entries[p]
		switch {
		case e == nil:
			return nil, op.failf(store.ErrNotFound, "no file %s", p)
		case e.info.IsDir:
			return nil, op.failf(store.ErrInvalid, "%s is a directory", p)
		}
		if err := f.lim.CheckFileSize(p, e.info.Size); err != nil {
			return nil, err
		}
		srcs = append(srcs, e)
	}
	return srcs, nil
}

// copyInto stores copies of srcs in dst's attachments, each at a fresh path, and records their
// descriptions in copies by source path. Every check comes before the first change.
func (f fileView) copyInto(ctx context.Context, op threadOp, dst *fileTree, threadID string, srcs []*fileEntry, copies map[string]*store.FileInfo) error {
	var total int64
	for _, e := range srcs {
		total += e.info.Size
	}
	dirs, err := dst.missingDirs(op, []string{store.AttachmentsDir})
	if err != nil {
		return err
	}
	if err := f.room(dst, threadID, total, int64(len(dirs)+len(srcs))); err != nil {
		return err
	}
	now := stamp.Now(ctx)
	targets := make([]string, len(srcs))
	chosen := map[string]bool{}
	for i, e := range srcs {
		p, err := freshAttachmentPath(ctx, op, store.AttachmentPath(ctx, e.info.Name, e.info.MimeType, now), e.info.Name, e.info.MimeType, now,
			func(q string) bool { return dst.entries[q] != nil || chosen[q] })
		if err != nil {
			return err
		}
		targets[i], chosen[p] = p, true
	}
	dst.mkdirs(ctx, dirs, now)
	for i, e := range srcs {
		c := &fileEntry{info: e.info, data: e.data}
		p := targets[i]
		c.info.ID, c.info.Path, c.info.Name, c.info.ModTime = stamp.ID(ctx, store.PrefixFile), p, store.BaseName(p), now
		c.info.OriginalName = e.info.DisplayName() // the copy's path is a name of the store's making
		dst.put(c)
		copies[e.info.Path] = c.describe()
	}
	return nil
}

// The Store's file system has the default caps.

// WriteFile implements store.Files.WriteFile.
func (s *Store) WriteFile(ctx context.Context, workspaceID, threadID, path string, data []byte, meta store.FileMeta) (*store.FileInfo, error) {
	return s.fs().WriteFile(ctx, workspaceID, threadID, path, data, meta)
}

// ReadFile implements store.Files.ReadFile.
func (s *Store) ReadFile(ctx context.Context, workspaceID, threadID, path string) ([]byte, *store.FileInfo, error) {
	return s.fs().ReadFile(ctx, workspaceID, threadID, path)
}

// Stat implements store.Files.Stat.
func (s *Store) Stat(ctx context.Context, workspaceID, threadID, path string) (*store.FileInfo, error) {
	return s.fs().Stat(ctx, workspaceID, threadID, path)
}

// ReadDir implements store.Files.ReadDir.
func (s *Store) ReadDir(ctx context.Context, workspaceID, threadID, path string) ([]*store.FileInfo, error) {
	return s.fs().ReadDir(ctx, workspaceID, threadID, path)
}

// Remove implements store.Files.Remove.
func (s *Store) Remove(ctx context.Context, workspaceID, threadID, path string) error {
	return s.fs().Remove(ctx, workspaceID, threadID, path)
}

// Mkdir implements store.Files.Mkdir.
func (s *Store) Mkdir(ctx context.Context, workspaceID, threadID, path string) (*store.FileInfo, error) {
	return s.fs().Mkdir(ctx, workspaceID, threadID, path)
}

// Rmdir implements store.Files.Rmdir.
func (s *Store) Rmdir(ctx context.Context, workspaceID, threadID, path string) error {
	return s.fs().Rmdir(ctx, workspaceID, threadID, path)
}

// Grep implements store.Files.Grep.
func (s *Store) Grep(ctx context.Context, workspaceID, threadID, root, pattern string) ([]store.GrepMatch, bool, error) {
	return s.fs().Grep(ctx, workspaceID, threadID, root, pattern)
}

// Find implements store.Files.Find.
func (s *Store) Find(ctx context.Context, workspaceID, threadID, root, pattern string) ([]string, bool, error) {
	return s.fs().Find(ctx, workspaceID, threadID, root, pattern)
}

// AddAttachment implements store.Files.AddAttachment.
func (s *Store) AddAttachment(ctx context.Context, workspaceID, threadID string, a store.NewAttachment) (*store.FileInfo, error) {
	return s.fs().AddAttachment(ctx, workspaceID, threadID, a)
}

// CopyFiles implements store.Files.CopyFiles.
func (s *Store) CopyFiles(ctx context.Context, workspaceID, fromThreadID string, paths []string, toThreadID string) ([]*store.FileInfo, error) {
	return s.fs().CopyFiles(ctx, workspaceID, fromThreadID, paths, toThreadID)
}
