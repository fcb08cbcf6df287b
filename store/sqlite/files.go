package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/quiverhq/quiver/store"
)

// The thread file system (store.Files) lives in two tables (migration 0002): files, one row
// per file or directory with its content in a BLOB, and file_usage, the bytes and entries each
// thread holds, updated by every change in the same transaction so that the caps are checked
// without summing. Changes are write transactions like any other (one writer connection,
// BEGIN IMMEDIATE), so they take turns with each other and with appends; reads use the read
// pool and a read transaction when they need more than one query, so they see one snapshot.

var _ store.Files = (*Store)(nil)

// WithFileLimits returns the store's file system with other caps than the defaults
// (store.DefaultFileLimits); zero fields of l keep their default. The store itself (its
// store.Files methods) always uses the defaults.
func (s *Store) WithFileLimits(l store.FileLimits) store.Files {
	return &fileSystem{s: s, lim: l.WithDefaults()}
}

func (s *Store) fileSystem() *fileSystem { return &fileSystem{s: s, lim: store.DefaultFileLimits()} }

// WriteFile creates or replaces the file at path; see store.Files.
func (s *Store) WriteFile(ctx context.Context, workspaceID, threadID, path string, data []byte, meta store.FileMeta) (*store.FileInfo, error) {
	return s.fileSystem().WriteFile(ctx, workspaceID, threadID, path, data, meta)
}

// ReadFile returns the content and description of the file at path; see store.Files.
func (s *Store) ReadFile(ctx context.Context, workspaceID, threadID, path string) ([]byte, *store.FileInfo, error) {
	return s.fileSystem().ReadFile(ctx, workspaceID, threadID, path)
}

// Stat describes the file or directory at path; see store.Files.
func (s *Store) Stat(ctx context.Context, workspaceID, threadID, path string) (*store.FileInfo, error) {
	return s.fileSystem().Stat(ctx, workspaceID, threadID, path)
}

// ReadDir lists a directory; see store.Files.
func (s *Store) ReadDir(ctx context.Context, workspaceID, threadID, path string) ([]*store.FileInfo, error) {
	return s.fileSystem().ReadDir(ctx, workspaceID, threadID, path)
}

// Remove deletes a file; see store.Files.
func (s *Store) Remove(ctx context.Context, workspaceID, threadID, path string) error {
	return s.fileSystem().Remove(ctx, workspaceID, threadID, path)
}

// Mkdir creates a directory and its missing parents; see store.Files.
func (s *Store) Mkdir(ctx context.Context, workspaceID, threadID, path string) (*store.FileInfo, error) {
	return s.fileSystem().Mkdir(ctx, workspaceID, threadID, path)
}

// Rmdir deletes an empty directory; see store.Files.
func (s *Store) Rmdir(ctx context.Context, workspaceID, threadID, path string) error {
	return s.fileSystem().Rmdir(ctx, workspaceID, threadID, path)
}

// Grep searches file contents with a regular expression, within bounds; see store.Files.
func (s *Store) Grep(ctx context.Context, workspaceID, threadID, root, pattern string) ([]store.GrepMatch, bool, error) {
	return s.fileSystem().Grep(ctx, workspaceID, threadID, root, pattern)
}

// Find lists the paths matching a glob; see store.Files.
func (s *Store) Find(ctx context.Context, workspaceID, threadID, root, pattern string) ([]string, bool, error) {
	return s.fileSystem().Find(ctx, workspaceID, threadID, root, pattern)
}

// AddAttachment stores a new attachment under /attachments/; see store.Files.
func (s *Store) AddAttachment(ctx context.Context, workspaceID, threadID string, a store.NewAttachment) (*store.FileInfo, error) {
	return s.fileSystem().AddAttachment(ctx, workspaceID, threadID, a)
}

// CopyFiles copies files into another thread's /attachments/; see store.Files.
func (s *Store) CopyFiles(ctx context.Context, workspaceID, fromThreadID string, paths []string, toThreadID string) ([]*store.FileInfo, error) {
	return s.fileSystem().CopyFiles(ctx, workspaceID, fromThreadID, paths, toThreadID)
}

// files is the store's file system under given caps.
type fileSystem struct {
	s   *Store
	lim store.FileLimits
}

// fileCols are read by scanFile, in this order.
const fileCols = `path, id, is_dir, size, mime_type, width, height, description, mod_time`

type fileScanner interface{ Scan(dest ...any) error }

func scanFile(row fileScanner, extra ...any) (*store.FileInfo, error) {
	var f store.FileInfo
	var mod int64
	if err := row.Scan(append([]any{&f.Path, &f.ID, &f.IsDir, &f.Size, &f.MimeType, &f.Width, &f.Height, &f.Description, &mod}, extra...)...); err != nil {
		return nil, err
	}
	f.Name = store.BaseName(f.Path)
	f.ModTime = time.Unix(0, mod).UTC()
	return &f, nil
}

func fsRootInfo() *store.FileInfo { return &store.FileInfo{Path: "/", Name: "/", IsDir: true} }

// usage is what a thread's files hold, as a change goes.
type fileUsage struct {
	thread         string
	lim            store.FileLimits
	bytes, entries int64
	changed        bool
}

// add accounts for a change of bytes and entries, refusing it over a cap.
func (u *fileUsage) add(bytes, entries int64) error {
	nb, ne := u.bytes+bytes, u.entries+entries
	if err := u.lim.CheckUsage(u.thread, nb, ne, bytes, entries); err != nil {
		return err
	}
	u.bytes, u.entries, u.changed = nb, ne, true
	return nil
}

// change runs fn in a write transaction once the thread is found in the workspace, then stores
// the thread's usage as fn left it.
func (f *fileSystem) change(ctx context.Context, op, workspaceID, threadID string, fn func(ctx context.Context, tx querier, u *fileUsage) error) error {
	return f.s.write(ctx, func(ctx context.Context, tx querier) error {
		if err := fsThreadExists(ctx, tx, op, workspaceID, threadID); err != nil {
			return err
		}
		u := &fileUsage{thread: threadID, lim: f.lim}
		err := tx.QueryRowContext(ctx, `SELECT bytes, entries FROM file_usage WHERE thread_id = ?`, threadID).Scan(&u.bytes, &u.entries)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("sqlite: %s: %w", op, err)
		}
		if err := fn(ctx, tx, u); err != nil {
			return err
		}
		if u.changed {
			if _, err := tx.ExecContext(ctx, `INSERT INTO file_usage (thread_id, bytes, entries) VALUES (?, ?, ?)
				ON CONFLICT (thread_id) DO UPDATE SET bytes = excluded.bytes, entries = excluded.entries`,
				threadID, u.bytes, u.entries); err != nil {
				return fmt.Errorf("sqlite: %s: %w", op, err)
			}
		}
		return nil
	})
}

type fileQuerier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// fsThreadExists returns store.ErrNotFound unless the workspace has the thread.
func fsThreadExists(ctx context.Context, q fileQuerier, op, workspaceID, threadID string) error {
	var one int
	err := q.QueryRowContext(ctx, `SELECT 1 FROM threads WHERE id = ? AND workspace_id = ?`, threadID, workspaceID).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("sqlite: %s: thread %s: %w", op, threadID, store.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("sqlite: %s: %w", op, err)
	}
	return nil
}

// read runs fn in a read transaction of the read pool once the thread is found in the
// workspace.
func (f *fileSystem) read(ctx context.Context, op, workspaceID, threadID string, fn func(tx querier) error) (err error) {
	defer func() { err = readErr(ctx, err) }()
	tx, err := f.s.r.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlite: %s: %w", op, err)
	}
	defer tx.Rollback()
	if err := fsThreadExists(ctx, tx, op, workspaceID, threadID); err != nil {
		return err
	}
	return fn(tx)
}

// stat returns the entry at p ("/" included), or store.ErrNotFound.
func fsStat(ctx context.Context, q fileQuerier, op, threadID, p string) (*store.FileInfo, error) {
	if p == "/" {
		return fsRootInfo(), nil
	}
	fi, err := scanFile(q.QueryRowContext(ctx, `SELECT `+fileCols+` FROM files WHERE thread_id = ? AND path = ?`, threadID, p))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("sqlite: %s: no file or directory %s: %w", op, p, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: %s: %w", op, err)
	}
	return fi, nil
}

// fsMissingDirs returns the directories of dirs (top down) that do not exist, or store.ErrInvalid
// when one of them is a file.
func fsMissingDirs(ctx context.Context, q fileQuerier, op, threadID string, dirs []string) ([]string, error) {
	if len(dirs) == 0 {
		return nil, nil
	}
	list, _ := json.Marshal(dirs)
	rows, err := q.QueryContext(ctx, `SELECT path, is_dir FROM files WHERE thread_id = ? AND path IN (SELECT value FROM json_each(?))`,
		threadID, string(list))
	if err != nil {
		return nil, fmt.Errorf("sqlite: %s: %w", op, err)
	}
	defer rows.Close()
	found := map[string]bool{}
	for rows.Next() {
		var p string
		var isDir bool
		if err := rows.Scan(&p, &isDir); err != nil {
			return nil, fmt.Errorf("sqlite: %s: %w", op, err)
		}
		if !isDir {
			return nil, fmt.Errorf("sqlite: %s: %s is a file, not a directory: %w", op, p, store.ErrInvalid)
		}
		found[p] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: %s: %w", op, err)
	}
	var out []string
	for _, d := range dirs {
		if !found[d] {
			out = append(out, d)
		}
	}
	return out, nil
}

const insertFile = `INSERT INTO files (thread_id, path, parent, id, is_dir, size, mime_type, width, height, description, mod_time, data)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

// mkdirs creates the directories dirs (top down, none existing).
func fsMkdirs(ctx context.Context, tx querier, op, threadID string, dirs []string, now time.Time) error {
	for _, d := range dirs {
		if _, err := tx.ExecContext(ctx, insertFile, threadID, d, store.ParentDir(d), store.NewID(store.PrefixFile), true, 0, "", 0, 0, "",
			now.UnixNano(), nil); err != nil {
			return fmt.Errorf("sqlite: %s: create directory %s: %w", op, d, err)
		}
	}
	return nil
}

// put writes a file at p, which holds nothing, and returns its description.
func fsPut(ctx context.Context, tx querier, op, threadID, p string, data []byte, meta store.FileMeta, now time.Time) (*store.FileInfo, error) {
	fi := &store.FileInfo{ID: store.NewID(store.PrefixFile), Path: p, Name: store.BaseName(p), Size: int64(len(data)),
		MimeType: meta.MimeType, Width: meta.Width, Height: meta.Height, Description: meta.Description, ModTime: now}
	if data == nil {
		data = []byte{} // NULL is for directories
	}
	if _, err := tx.ExecContext(ctx, insertFile, threadID, p, store.ParentDir(p), fi.ID, false, fi.Size, fi.MimeType, fi.Width,
		fi.Height, fi.Description, now.UnixNano(), data); err != nil {
		return nil, fmt.Errorf("sqlite: %s: %w", op, err)
	}
	return fi, nil
}

func fsNow() time.Time { return time.Now().UTC().Round(0) }

// WriteFile implements store.Files.WriteFile.
func (f *fileSystem) WriteFile(ctx context.Context, workspaceID, threadID, p string, data []byte, meta store.FileMeta) (*store.FileInfo, error) {
	op := "write " + p
	meta, err := store.PrepareWrite(f.lim, p, data, meta)
	if err != nil {
		return nil, err
	}
	var out *store.FileInfo
	err = f.change(ctx, op, workspaceID, threadID, func(ctx context.Context, tx querier, u *fileUsage) error {
		old, err := fsStat(ctx, tx, op, threadID, p)
		switch {
		case err == nil && old.IsDir:
			return fmt.Errorf("sqlite: %s: it is a directory: %w", op, store.ErrInvalid)
		case err == nil:
			if err := u.add(int64(len(data))-old.Size, 0); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `DELETE FROM files WHERE thread_id = ? AND path = ?`, threadID, p); err != nil {
				return fmt.Errorf("sqlite: %s: %w", op, err)
			}
			out, err = fsPut(ctx, tx, op, threadID, p, data, meta, fsNow())
			return err
		case !errors.Is(err, store.ErrNotFound):
			return err
		}
		dirs, err := fsMissingDirs(ctx, tx, op, threadID, store.Ancestors(p))
		if err != nil {
			return err
		}
		if err := u.add(int64(len(data)), int64(len(dirs))+1); err != nil {
			return err
		}
		t := fsNow()
		if err := fsMkdirs(ctx, tx, op, threadID, dirs, t); err != nil {
			return err
		}
		out, err = fsPut(ctx, tx, op, threadID, p, data, meta, t)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ReadFile implements store.Files.ReadFile.
func (f *fileSystem) ReadFile(ctx context.Context, workspaceID, threadID, p string) ([]byte, *store.FileInfo, error) {
	op := "read " + p
	if err := store.CheckPath(p); err != nil {
		return nil, nil, err
	}
	var data []byte
	var fi *store.FileInfo
	err := f.read(ctx, op, workspaceID, threadID, func(tx querier) error {
		var err error
		if p == "/" {
			return fmt.Errorf("sqlite: %s: it is a directory: %w", op, store.ErrInvalid)
		}
		fi, err = scanFile(tx.QueryRowContext(ctx, `SELECT `+fileCols+`, data FROM files WHERE thread_id = ? AND path = ?`, threadID, p), &data)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("sqlite: %s: no such file: %w", op, store.ErrNotFound)
		case err != nil:
			return fmt.Errorf("sqlite: %s: %w", op, err)
		case fi.IsDir:
			return fmt.Errorf("sqlite: %s: it is a directory: %w", op, store.ErrInvalid)
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	if data == nil {
		data = []byte{}
	}
	return data, fi, nil
}

// Stat implements store.Files.Stat.
func (f *fileSystem) Stat(ctx context.Context, workspaceID, threadID, p string) (*store.FileInfo, error) {
	op := "stat " + p
	if err := store.CheckPath(p); err != nil {
		return nil, err
	}
	var fi *store.FileInfo
	err := f.read(ctx, op, workspaceID, threadID, func(tx querier) error {
		var err error
		fi, err = fsStat(ctx, tx, op, threadID, p)
		return err
	})
	return fi, err
}

// ReadDir implements store.Files.ReadDir.
func (f *fileSystem) ReadDir(ctx context.Context, workspaceID, threadID, p string) ([]*store.FileInfo, error) {
	op := "read directory " + p
	if err := store.CheckPath(p); err != nil {
		return nil, err
	}
	out := []*store.FileInfo{}
	err := f.read(ctx, op, workspaceID, threadID, func(tx querier) error {
		dir, err := fsStat(ctx, tx, op, threadID, p)
		if err != nil {
			return err
		}
		if !dir.IsDir {
			return fmt.Errorf("sqlite: %s: it is a file, not a directory: %w", op, store.ErrInvalid)
		}
		rows, err := tx.QueryContext(ctx, `SELECT `+fileCols+` FROM files WHERE thread_id = ? AND parent = ? ORDER BY path`, threadID, p)
		if err != nil {
			return fmt.Errorf("sqlite: %s: %w", op, err)
		}
		defer rows.Close()
		for rows.Next() {
			fi, err := scanFile(rows)
			if err != nil {
				return fmt.Errorf("sqlite: %s: %w", op, err)
			}
			out = append(out, fi)
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("sqlite: %s: %w", op, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Remove implements store.Files.Remove.
func (f *fileSystem) Remove(ctx context.Context, workspaceID, threadID, p string) error {
	op := "remove " + p
	if err := store.CheckPath(p); err != nil {
		return err
	}
	return f.change(ctx, op, workspaceID, threadID, func(ctx context.Context, tx querier, u *fileUsage) error {
		fi, err := fsStat(ctx, tx, op, threadID, p)
		if err != nil {
			return err
		}
		if fi.IsDir {
			return fmt.Errorf("sqlite: %s: it is a directory (remove it with Rmdir): %w", op, store.ErrInvalid)
		}
		if err := u.add(-fi.Size, -1); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM files WHERE thread_id = ? AND path = ?`, threadID, p); err != nil {
			return fmt.Errorf("sqlite: %s: %w", op, err)
		}
		return nil
	})
}

// Mkdir implements store.Files.Mkdir.
func (f *fileSystem) Mkdir(ctx context.Context, workspaceID, threadID, p string) (*store.FileInfo, error) {
	op := "make directory " + p
	if err := store.CheckPath(p); err != nil {
		return nil, err
	}
	if p == "/" { // after the thread check: a thread the workspace does not have is not found
		return nil, f.read(ctx, op, workspaceID, threadID, func(querier) error {
			return fmt.Errorf("sqlite: %s: the root directory always exists: %w", op, store.ErrExists)
		})
	}
	var out *store.FileInfo
	err := f.change(ctx, op, workspaceID, threadID, func(ctx context.Context, tx querier, u *fileUsage) error {
		old, err := fsStat(ctx, tx, op, threadID, p)
		switch {
		case err == nil && old.IsDir:
			return fmt.Errorf("sqlite: %s: the directory exists: %w", op, store.ErrExists)
		case err == nil:
			return fmt.Errorf("sqlite: %s: a file exists there: %w", op, store.ErrExists)
		case !errors.Is(err, store.ErrNotFound):
			return err
		}
		dirs, err := fsMissingDirs(ctx, tx, op, threadID, store.Ancestors(p))
		if err != nil {
			return err
		}
		dirs = append(dirs, p)
		if err := u.add(0, int64(len(dirs))); err != nil {
			return err
		}
		if err := fsMkdirs(ctx, tx, op, threadID, dirs, fsNow()); err != nil {
			return err
		}
		out, err = fsStat(ctx, tx, op, threadID, p)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Rmdir implements store.Files.Rmdir.
func (f *fileSystem) Rmdir(ctx context.Context, workspaceID, threadID, p string) error {
	op := "remove directory " + p
	if err := store.CheckPath(p); err != nil {
		return err
	}
	if p == "/" {
		return f.read(ctx, op, workspaceID, threadID, func(querier) error {
			return fmt.Errorf("sqlite: %s: the root directory cannot be removed: %w", op, store.ErrInvalid)
		})
	}
	return f.change(ctx, op, workspaceID, threadID, func(ctx context.Context, tx querier, u *fileUsage) error {
		fi, err := fsStat(ctx, tx, op, threadID, p)
		if err != nil {
			return err
		}
		if !fi.IsDir {
			return fmt.Errorf("sqlite: %s: it is a file (remove it with Remove): %w", op, store.ErrInvalid)
		}
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM (SELECT 1 FROM files WHERE thread_id = ? AND parent = ? LIMIT 1)`,
			threadID, p).Scan(&n); err != nil {
			return fmt.Errorf("sqlite: %s: %w", op, err)
		}
		if n > 0 {
			return fmt.Errorf("sqlite: %s: the directory is not empty: %w", op, store.ErrInvalid)
		}
		if err := u.add(0, -1); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM files WHERE thread_id = ? AND path = ?`, threadID, p); err != nil {
			return fmt.Errorf("sqlite: %s: %w", op, err)
		}
		return nil
	})
}

// fsSubtree is the condition on path (two parameters: fsSubtreeArgs) selecting the entries under
// the directory root, root excluded: paths compare byte by byte, and those under "/a" are the
// ones from "/a/" up to "/a0" ('0' follows '/').
const fsSubtree = `path >= ? AND path < ?`

func fsSubtreeArgs(root string) (lo, hi string) {
	if root == "/" {
		return "/", "0"
	}
	return root + "/", root + "0"
}

// Grep implements store.Files.Grep.
func (f *fileSystem) Grep(ctx context.Context, workspaceID, threadID, root, pattern string) ([]store.GrepMatch, bool, error) {
	op := "grep " + root
	if err := store.CheckPath(root); err != nil {
		return nil, false, err
	}
	g, err := store.NewGrepSearch(pattern, f.lim)
	if err != nil {
		return nil, false, err
	}
	err = f.read(ctx, op, workspaceID, threadID, func(tx querier) error {
		top, err := fsStat(ctx, tx, op, threadID, root)
		if err != nil {
			return err
		}
		type candidate struct {
			path string
			size int64
		}
		var cands []candidate
		if !top.IsDir {
			cands = append(cands, candidate{top.Path, top.Size})
		} else {
			lo, hi := fsSubtreeArgs(root)
			rows, err := tx.QueryContext(ctx, `SELECT path, size FROM files WHERE thread_id = ? AND `+fsSubtree+` AND NOT is_dir ORDER BY path`,
				threadID, lo, hi)
			if err != nil {
				return fmt.Errorf("sqlite: %s: %w", op, err)
			}
			for rows.Next() {
				var c candidate
				if err := rows.Scan(&c.path, &c.size); err != nil {
					rows.Close()
					return fmt.Errorf("sqlite: %s: %w", op, err)
				}
				cands = append(cands, c)
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return fmt.Errorf("sqlite: %s: %w", op, err)
			}
		}
		get, err := tx.PrepareContext(ctx, `SELECT data FROM files WHERE thread_id = ? AND path = ?`)
		if err != nil {
			return fmt.Errorf("sqlite: %s: %w", op, err)
		}
		defer get.Close()
		for _, c := range cands {
			if !g.Admit(c.size) {
				break
			}
			var data []byte
			if err := get.QueryRowContext(ctx, threadID, c.path).Scan(&data); err != nil {
				return fmt.Errorf("sqlite: %s: %w", op, err)
			}
			if !g.Scan(c.path, data) {
				break
			}
		}
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	matches, truncated := g.Result()
	return matches, truncated, nil
}

// Find implements store.Files.Find.
func (f *fileSystem) Find(ctx context.Context, workspaceID, threadID, root, pattern string) ([]string, bool, error) {
	op := "find in " + root
	if err := store.CheckPath(root); err != nil {
		return nil, false, err
	}
	search, err := store.NewFindSearch(root, pattern, f.lim)
	if err != nil {
		return nil, false, err
	}
	err = f.read(ctx, op, workspaceID, threadID, func(tx querier) error {
		top, err := fsStat(ctx, tx, op, threadID, root)
		if err != nil {
			return err
		}
		if !top.IsDir {
			return fmt.Errorf("sqlite: %s: it is a file, not a directory: %w", op, store.ErrInvalid)
		}
		lo, hi := fsSubtreeArgs(root)
		rows, err := tx.QueryContext(ctx, `SELECT path FROM files WHERE thread_id = ? AND `+fsSubtree+` ORDER BY path`, threadID, lo, hi)
		if err != nil {
			return fmt.Errorf("sqlite: %s: %w", op, err)
		}
		defer rows.Close()
		for rows.Next() {
			var p string
			if err := rows.Scan(&p); err != nil {
				return fmt.Errorf("sqlite: %s: %w", op, err)
			}
			if !search.Add(p) {
				return nil
			}
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("sqlite: %s: %w", op, err)
		}
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	paths, truncated := search.Result()
	return paths, truncated, nil
}

// freshAttachmentPath returns p, or another attachment path when p is taken (which 64 random
// bits make all but impossible).
func freshAttachmentPath(ctx context.Context, tx querier, op, threadID, p, name, mimeType string) (string, error) {
	for range 8 {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM files WHERE thread_id = ? AND path = ?`, threadID, p).Scan(&n); err != nil {
			return "", fmt.Errorf("sqlite: %s: %w", op, err)
		}
		if n == 0 {
			return p, nil
		}
		p = store.AttachmentPath(name, mimeType, time.Now())
	}
	return "", fmt.Errorf("sqlite: %s: no free attachment name found: %w", op, store.ErrExists)
}

// AddAttachment implements store.Files.AddAttachment.
func (f *fileSystem) AddAttachment(ctx context.Context, workspaceID, threadID string, a store.NewAttachment) (*store.FileInfo, error) {
	op := "add attachment"
	t := fsNow()
	p, meta, err := store.PrepareAttachment(f.lim, a, t)
	if err != nil {
		return nil, err
	}
	var out *store.FileInfo
	err = f.change(ctx, op, workspaceID, threadID, func(ctx context.Context, tx querier, u *fileUsage) error {
		dirs, err := fsMissingDirs(ctx, tx, op, threadID, []string{store.AttachmentsDir})
		if err != nil {
			return err
		}
		if err := u.add(int64(len(a.Data)), int64(len(dirs))+1); err != nil {
			return err
		}
		if err := fsMkdirs(ctx, tx, op, threadID, dirs, t); err != nil {
			return err
		}
		if p, err = freshAttachmentPath(ctx, tx, op, threadID, p, a.Name, meta.MimeType); err != nil {
			return err
		}
		out, err = fsPut(ctx, tx, op, threadID, p, a.Data, meta, t)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// CopyFiles implements store.Files.CopyFiles.
func (f *fileSystem) CopyFiles(ctx context.Context, workspaceID, fromThreadID string, paths []string, toThreadID string) ([]*store.FileInfo, error) {
	op := fmt.Sprintf("copy files from thread %s to thread %s", fromThreadID, toThreadID)
	var unique []string
	seen := map[string]bool{}
	for _, p := range paths {
		if err := store.CheckPath(p); err != nil {
			return nil, err
		}
		if p == "/" {
			return nil, fmt.Errorf("sqlite: %s: / is a directory: %w", op, store.ErrInvalid)
		}
		if !seen[p] {
			seen[p] = true
			unique = append(unique, p)
		}
	}
	copies := map[string]*store.FileInfo{}
	err := f.change(ctx, op, workspaceID, toThreadID, func(ctx context.Context, tx querier, u *fileUsage) error {
		if err := fsThreadExists(ctx, tx, op, workspaceID, fromThreadID); err != nil {
			return err
		}
		var srcs []*store.FileInfo
		var total int64
		for _, p := range unique {
			fi, err := fsStat(ctx, tx, op, fromThreadID, p)
			if err != nil {
				return err
			}
			if fi.IsDir {
				return fmt.Errorf("sqlite: %s: %s is a directory: %w", op, p, store.ErrInvalid)
			}
			if err := f.lim.CheckFileSize(p, fi.Size); err != nil {
				return err
			}
			srcs = append(srcs, fi)
			total += fi.Size
		}
		if len(srcs) == 0 {
			return nil
		}
		dirs, err := fsMissingDirs(ctx, tx, op, toThreadID, []string{store.AttachmentsDir})
		if err != nil {
			return err
		}
		if err := u.add(total, int64(len(dirs)+len(srcs))); err != nil {
			return err
		}
		t := fsNow()
		if err := fsMkdirs(ctx, tx, op, toThreadID, dirs, t); err != nil {
			return err
		}
		for _, src := range srcs {
			p, err := freshAttachmentPath(ctx, tx, op, toThreadID, store.AttachmentPath(src.Name, src.MimeType, t), src.Name, src.MimeType)
			if err != nil {
				return err
			}
			c := *src
			c.ID, c.Path, c.Name, c.ModTime = store.NewID(store.PrefixFile), p, store.BaseName(p), t
			if _, err := tx.ExecContext(ctx, `INSERT INTO files
				(thread_id, path, parent, id, is_dir, size, mime_type, width, height, description, mod_time, data)
				SELECT ?, ?, ?, ?, 0, size, mime_type, width, height, description, ?, data
				FROM files WHERE thread_id = ? AND path = ?`,
				toThreadID, c.Path, store.AttachmentsDir, c.ID, t.UnixNano(), fromThreadID, src.Path); err != nil {
				return fmt.Errorf("sqlite: %s: %s: %w", op, src.Path, err)
			}
			copies[src.Path] = &c
		}
		return nil
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
