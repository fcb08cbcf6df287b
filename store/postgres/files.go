package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/quiverhq/quiver/store"
)

// The thread file system (store.Files) lives in two tables (migration 0002): files, one row
// per file or directory with its content in a bytea, and file_usage, the bytes and entries
// each thread holds. Every change first locks the thread's file_usage row (creating it when
// missing), so changes to one thread's files take turns across connections and nodes: the caps
// hold under concurrent writers, a mkdir -p never races a rmdir, and the last of several
// writers of a path wins whole. The lock is not the thread row's, so appends to the thread's
// messages go on meanwhile. Reads that need more than one query run in a read-only
// REPEATABLE READ transaction, so they see one snapshot. Times come from the database clock.

var _ store.Files = (*Store)(nil)

// WithFileLimits returns the store's file system with other caps than the defaults
// (store.DefaultFileLimits); zero fields of l keep their default. The store itself (its
// store.Files methods) always uses the defaults. Every node sharing a database should use the
// same caps.
func (s *Store) WithFileLimits(l store.FileLimits) store.Files {
	return &pgFiles{s: s, lim: l.WithDefaults()}
}

func (s *Store) fileSystem() *pgFiles { return &pgFiles{s: s, lim: store.DefaultFileLimits()} }

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

// pgFiles is the store's file system under given caps.
type pgFiles struct {
	s   *Store
	lim store.FileLimits
}

// pgFileCols are read by scanPGFile, in this order.
const pgFileCols = `path, id, is_dir, size, mime_type, width, height, description, mod_time`

func scanPGFile(row pgx.Row, extra ...any) (*store.FileInfo, error) {
	var f store.FileInfo
	if err := row.Scan(append([]any{&f.Path, &f.ID, &f.IsDir, &f.Size, &f.MimeType, &f.Width, &f.Height, &f.Description, &f.ModTime}, extra...)...); err != nil {
		return nil, err
	}
	f.Name = store.BaseName(f.Path)
	f.ModTime = f.ModTime.UTC()
	return &f, nil
}

func pgRootInfo() *store.FileInfo { return &store.FileInfo{Path: "/", Name: "/", IsDir: true} }

// pgFileUsage is what a thread's files hold, as a change goes, and the time of the change.
type pgFileUsage struct {
	thread         string
	lim            store.FileLimits
	bytes, entries int64
	changed        bool
	now            time.Time
}

// add accounts for a change of bytes and entries, refusing it over a cap.
func (u *pgFileUsage) add(bytes, entries int64) error {
	nb, ne := u.bytes+bytes, u.entries+entries
	if err := u.lim.CheckUsage(u.thread, nb, ne, bytes, entries); err != nil {
		return err
	}
	u.bytes, u.entries, u.changed = nb, ne, true
	return nil
}

// change runs fn in a transaction holding the lock on the thread's file system (its
// file_usage row), once the thread is found in the workspace, then stores the usage as fn left
// it.
func (f *pgFiles) change(ctx context.Context, op, workspaceID, threadID string, fn func(tx pgx.Tx, u *pgFileUsage) error) error {
	return pgx.BeginFunc(ctx, f.s.pool, func(tx pgx.Tx) error {
		u := &pgFileUsage{thread: threadID, lim: f.lim}
		err := tx.QueryRow(ctx, `INSERT INTO file_usage (thread_id) SELECT id FROM threads WHERE id = $1 AND workspace_id = $2
ON CONFLICT (thread_id) DO UPDATE SET bytes = file_usage.bytes
RETURNING bytes, entries, clock_timestamp()`, threadID, workspaceID).Scan(&u.bytes, &u.entries, &u.now)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("postgres: %s: thread %s: %w", op, threadID, store.ErrNotFound)
		}
		if err != nil {
			return dbError(op, err)
		}
		u.now = u.now.UTC()
		if err := fn(tx, u); err != nil {
			return err
		}
		if u.changed {
			if _, err := tx.Exec(ctx, `UPDATE file_usage SET bytes = $2, entries = $3 WHERE thread_id = $1`, threadID, u.bytes, u.entries); err != nil {
				return dbError(op, err)
			}
		}
		return nil
	})
}

// pgThreadExists returns store.ErrNotFound unless the workspace has the thread.
func pgThreadExists(ctx context.Context, tx pgx.Tx, op, workspaceID, threadID string) error {
	var ok bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT FROM threads WHERE id = $1 AND workspace_id = $2)`, threadID, workspaceID).Scan(&ok); err != nil {
		return dbError(op, err)
	}
	if !ok {
		return fmt.Errorf("postgres: %s: thread %s: %w", op, threadID, store.ErrNotFound)
	}
	return nil
}

// read runs fn in a read-only snapshot once the thread is found in the workspace.
func (f *pgFiles) read(ctx context.Context, op, workspaceID, threadID string, fn func(tx pgx.Tx) error) error {
	return pgx.BeginTxFunc(ctx, f.s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if err := pgThreadExists(ctx, tx, op, workspaceID, threadID); err != nil {
			return err
		}
		return fn(tx)
	})
}

// pgStat returns the entry at p ("/" included), or store.ErrNotFound.
func pgStat(ctx context.Context, tx pgx.Tx, op, threadID, p string) (*store.FileInfo, error) {
	if p == "/" {
		return pgRootInfo(), nil
	}
	fi, err := scanPGFile(tx.QueryRow(ctx, `SELECT `+pgFileCols+` FROM files WHERE thread_id = $1 AND path = $2`, threadID, p))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("postgres: %s: no file or directory %s: %w", op, p, store.ErrNotFound)
	}
	if err != nil {
		return nil, dbError(op, err)
	}
	return fi, nil
}

// statOne reads the entry at p with the thread check in the same query (one round trip), and
// its content too when data is not nil.
func (f *pgFiles) statOne(ctx context.Context, op, workspaceID, threadID, p string, data *[]byte) (*store.FileInfo, error) {
	if p == "/" {
		var ok bool
		if err := f.s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM threads WHERE id = $1 AND workspace_id = $2)`, threadID, workspaceID).Scan(&ok); err != nil {
			return nil, dbError(op, err)
		}
		if !ok {
			return nil, fmt.Errorf("postgres: %s: thread %s: %w", op, threadID, store.ErrNotFound)
		}
		return pgRootInfo(), nil
	}
	content := "NULL::bytea"
	if data != nil {
		content = "f.data"
	}
	var found bool
	var buf []byte
	var fi store.FileInfo
	err := f.s.pool.QueryRow(ctx, `SELECT f.path IS NOT NULL, COALESCE(f.path, ''), COALESCE(f.id, ''), COALESCE(f.is_dir, false),
	COALESCE(f.size, 0), COALESCE(f.mime_type, ''), COALESCE(f.width, 0), COALESCE(f.height, 0), COALESCE(f.description, ''),
	COALESCE(f.mod_time, 'epoch'), `+content+`
FROM threads t LEFT JOIN files f ON f.thread_id = t.id AND f.path = $2
WHERE t.id = $1 AND t.workspace_id = $3`, threadID, p, workspaceID).Scan(&found, &fi.Path, &fi.ID, &fi.IsDir, &fi.Size, &fi.MimeType,
		&fi.Width, &fi.Height, &fi.Description, &fi.ModTime, &buf)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, fmt.Errorf("postgres: %s: thread %s: %w", op, threadID, store.ErrNotFound)
	case err != nil:
		return nil, dbError(op, err)
	case !found:
		return nil, fmt.Errorf("postgres: %s: no file or directory %s: %w", op, p, store.ErrNotFound)
	}
	fi.Name, fi.ModTime = store.BaseName(fi.Path), fi.ModTime.UTC()
	if data != nil {
		*data = buf
	}
	return &fi, nil
}

// pgMissingDirs returns the directories of dirs (top down) that do not exist, or
// store.ErrInvalid when one of them is a file.
func pgMissingDirs(ctx context.Context, tx pgx.Tx, op, threadID string, dirs []string) ([]string, error) {
	if len(dirs) == 0 {
		return nil, nil
	}
	rows, err := tx.Query(ctx, `SELECT path, is_dir FROM files WHERE thread_id = $1 AND path = ANY($2::text[])`, threadID, dirs)
	if err != nil {
		return nil, dbError(op, err)
	}
	found := map[string]bool{}
	var p string
	var isDir bool
	_, err = pgx.ForEachRow(rows, []any{&p, &isDir}, func() error {
		if !isDir {
			return fmt.Errorf("postgres: %s: %s is a file, not a directory: %w", op, p, store.ErrInvalid)
		}
		found[p] = true
		return nil
	})
	if err != nil {
		if errors.Is(err, store.ErrInvalid) {
			return nil, err
		}
		return nil, dbError(op, err)
	}
	var out []string
	for _, d := range dirs {
		if !found[d] {
			out = append(out, d)
		}
	}
	return out, nil
}

const pgInsertFile = `INSERT INTO files (thread_id, path, parent, id, is_dir, size, mime_type, width, height, description, mod_time, data)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`

// pgMkdirs creates the directories dirs (top down, none existing).
func pgMkdirs(ctx context.Context, tx pgx.Tx, op, threadID string, dirs []string, now time.Time) error {
	for _, d := range dirs {
		if _, err := tx.Exec(ctx, pgInsertFile, threadID, d, store.ParentDir(d), store.NewID(store.PrefixFile), true, 0, "", 0, 0, "",
			now, nil); err != nil {
			return dbError(op+": create directory "+d, err)
		}
	}
	return nil
}

// pgPut writes a file at p, which holds nothing, and returns its description.
func pgPut(ctx context.Context, tx pgx.Tx, op, threadID, p string, data []byte, meta store.FileMeta, now time.Time) (*store.FileInfo, error) {
	fi := &store.FileInfo{ID: store.NewID(store.PrefixFile), Path: p, Name: store.BaseName(p), Size: int64(len(data)),
		MimeType: meta.MimeType, Width: meta.Width, Height: meta.Height, Description: meta.Description, ModTime: now}
	if data == nil {
		data = []byte{} // NULL is for directories
	}
	if _, err := tx.Exec(ctx, pgInsertFile, threadID, p, store.ParentDir(p), fi.ID, false, fi.Size, fi.MimeType, fi.Width,
		fi.Height, fi.Description, now, data); err != nil {
		return nil, dbError(op, err)
	}
	return fi, nil
}

// WriteFile implements store.Files.WriteFile.
func (f *pgFiles) WriteFile(ctx context.Context, workspaceID, threadID, p string, data []byte, meta store.FileMeta) (*store.FileInfo, error) {
	op := "write " + p
	meta, err := store.PrepareWrite(f.lim, p, data, meta)
	if err != nil {
		return nil, err
	}
	var out *store.FileInfo
	err = f.change(ctx, op, workspaceID, threadID, func(tx pgx.Tx, u *pgFileUsage) error {
		old, err := pgStat(ctx, tx, op, threadID, p)
		switch {
		case err == nil && old.IsDir:
			return fmt.Errorf("postgres: %s: it is a directory: %w", op, store.ErrInvalid)
		case err == nil:
			if err := u.add(int64(len(data))-old.Size, 0); err != nil {
				return err
			}
			// An UPDATE rather than DELETE and INSERT: a copy holding the row (FOR SHARE) then
			// sees the new version, not a deleted row.
			out = &store.FileInfo{ID: store.NewID(store.PrefixFile), Path: p, Name: store.BaseName(p), Size: int64(len(data)),
				MimeType: meta.MimeType, Width: meta.Width, Height: meta.Height, Description: meta.Description, ModTime: u.now}
			if data == nil {
				data = []byte{}
			}
			if _, err := tx.Exec(ctx, `UPDATE files SET id = $3, size = $4, mime_type = $5, width = $6, height = $7, description = $8,
	mod_time = $9, data = $10
WHERE thread_id = $1 AND path = $2`, threadID, p, out.ID, out.Size, out.MimeType, out.Width, out.Height, out.Description, u.now, data); err != nil {
				return dbError(op, err)
			}
			return nil
		case !errors.Is(err, store.ErrNotFound):
			return err
		}
		dirs, err := pgMissingDirs(ctx, tx, op, threadID, store.Ancestors(p))
		if err != nil {
			return err
		}
		if err := u.add(int64(len(data)), int64(len(dirs))+1); err != nil {
			return err
		}
		if err := pgMkdirs(ctx, tx, op, threadID, dirs, u.now); err != nil {
			return err
		}
		out, err = pgPut(ctx, tx, op, threadID, p, data, meta, u.now)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ReadFile implements store.Files.ReadFile.
func (f *pgFiles) ReadFile(ctx context.Context, workspaceID, threadID, p string) ([]byte, *store.FileInfo, error) {
	op := "read " + p
	if err := store.CheckPath(p); err != nil {
		return nil, nil, err
	}
	var data []byte
	fi, err := f.statOne(ctx, op, workspaceID, threadID, p, &data)
	if err != nil {
		return nil, nil, err
	}
	if fi.IsDir {
		return nil, nil, fmt.Errorf("postgres: %s: it is a directory: %w", op, store.ErrInvalid)
	}
	if data == nil {
		data = []byte{}
	}
	return data, fi, nil
}

// Stat implements store.Files.Stat.
func (f *pgFiles) Stat(ctx context.Context, workspaceID, threadID, p string) (*store.FileInfo, error) {
	if err := store.CheckPath(p); err != nil {
		return nil, err
	}
	return f.statOne(ctx, "stat "+p, workspaceID, threadID, p, nil)
}

// ReadDir implements store.Files.ReadDir.
func (f *pgFiles) ReadDir(ctx context.Context, workspaceID, threadID, p string) ([]*store.FileInfo, error) {
	op := "read directory " + p
	if err := store.CheckPath(p); err != nil {
		return nil, err
	}
	var out []*store.FileInfo
	err := f.read(ctx, op, workspaceID, threadID, func(tx pgx.Tx) error {
		dir, err := pgStat(ctx, tx, op, threadID, p)
		if err != nil {
			return err
		}
		if !dir.IsDir {
			return fmt.Errorf("postgres: %s: it is a file, not a directory: %w", op, store.ErrInvalid)
		}
		rows, err := tx.Query(ctx, `SELECT `+pgFileCols+` FROM files WHERE thread_id = $1 AND parent = $2 ORDER BY path`, threadID, p)
		if err != nil {
			return dbError(op, err)
		}
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.FileInfo, error) { return scanPGFile(row) })
		if err != nil {
			return dbError(op, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Remove implements store.Files.Remove.
func (f *pgFiles) Remove(ctx context.Context, workspaceID, threadID, p string) error {
	op := "remove " + p
	if err := store.CheckPath(p); err != nil {
		return err
	}
	return f.change(ctx, op, workspaceID, threadID, func(tx pgx.Tx, u *pgFileUsage) error {
		fi, err := pgStat(ctx, tx, op, threadID, p)
		if err != nil {
			return err
		}
		if fi.IsDir {
			return fmt.Errorf("postgres: %s: it is a directory (remove it with Rmdir): %w", op, store.ErrInvalid)
		}
		if err := u.add(-fi.Size, -1); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM files WHERE thread_id = $1 AND path = $2`, threadID, p); err != nil {
			return dbError(op, err)
		}
		return nil
	})
}

// Mkdir implements store.Files.Mkdir.
func (f *pgFiles) Mkdir(ctx context.Context, workspaceID, threadID, p string) (*store.FileInfo, error) {
	op := "make directory " + p
	if err := store.CheckPath(p); err != nil {
		return nil, err
	}
	if p == "/" {
		// Still a not-found for a thread the workspace does not have.
		if _, err := f.statOne(ctx, op, workspaceID, threadID, p, nil); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("postgres: %s: the root directory always exists: %w", op, store.ErrExists)
	}
	var out *store.FileInfo
	err := f.change(ctx, op, workspaceID, threadID, func(tx pgx.Tx, u *pgFileUsage) error {
		old, err := pgStat(ctx, tx, op, threadID, p)
		switch {
		case err == nil && old.IsDir:
			return fmt.Errorf("postgres: %s: the directory exists: %w", op, store.ErrExists)
		case err == nil:
			return fmt.Errorf("postgres: %s: a file exists there: %w", op, store.ErrExists)
		case !errors.Is(err, store.ErrNotFound):
			return err
		}
		dirs, err := pgMissingDirs(ctx, tx, op, threadID, store.Ancestors(p))
		if err != nil {
			return err
		}
		dirs = append(dirs, p)
		if err := u.add(0, int64(len(dirs))); err != nil {
			return err
		}
		if err := pgMkdirs(ctx, tx, op, threadID, dirs, u.now); err != nil {
			return err
		}
		out, err = pgStat(ctx, tx, op, threadID, p)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Rmdir implements store.Files.Rmdir.
func (f *pgFiles) Rmdir(ctx context.Context, workspaceID, threadID, p string) error {
	op := "remove directory " + p
	if err := store.CheckPath(p); err != nil {
		return err
	}
	if p == "/" {
		if _, err := f.statOne(ctx, op, workspaceID, threadID, p, nil); err != nil {
			return err
		}
		return fmt.Errorf("postgres: %s: the root directory cannot be removed: %w", op, store.ErrInvalid)
	}
	return f.change(ctx, op, workspaceID, threadID, func(tx pgx.Tx, u *pgFileUsage) error {
		fi, err := pgStat(ctx, tx, op, threadID, p)
		if err != nil {
			return err
		}
		if !fi.IsDir {
			return fmt.Errorf("postgres: %s: it is a file (remove it with Remove): %w", op, store.ErrInvalid)
		}
		var busy bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT FROM files WHERE thread_id = $1 AND parent = $2)`, threadID, p).Scan(&busy); err != nil {
			return dbError(op, err)
		}
		if busy {
			return fmt.Errorf("postgres: %s: the directory is not empty: %w", op, store.ErrInvalid)
		}
		if err := u.add(0, -1); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM files WHERE thread_id = $1 AND path = $2`, threadID, p); err != nil {
			return dbError(op, err)
		}
		return nil
	})
}

// pgSubtree is the condition on path ($2 and $3: pgSubtreeArgs) selecting the entries under
// the directory root, root excluded: paths compare byte by byte (collation "C"), and those
// under "/a" are the ones from "/a/" up to "/a0" ('0' follows '/').
const pgSubtree = `path >= $2 AND path < $3`

func pgSubtreeArgs(root string) (lo, hi string) {
	if root == "/" {
		return "/", "0"
	}
	return root + "/", root + "0"
}

// grepBatchBytes and grepBatchFiles bound one query of Grep for file contents.
const (
	grepBatchBytes = 4 << 20
	grepBatchFiles = 256
)

// Grep implements store.Files.Grep.
func (f *pgFiles) Grep(ctx context.Context, workspaceID, threadID, root, pattern string) ([]store.GrepMatch, bool, error) {
	op := "grep " + root
	if err := store.CheckPath(root); err != nil {
		return nil, false, err
	}
	g, err := store.NewGrepSearch(pattern, f.lim)
	if err != nil {
		return nil, false, err
	}
	err = f.read(ctx, op, workspaceID, threadID, func(tx pgx.Tx) error {
		top, err := pgStat(ctx, tx, op, threadID, root)
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
			lo, hi := pgSubtreeArgs(root)
			rows, err := tx.Query(ctx, `SELECT path, size FROM files WHERE thread_id = $1 AND `+pgSubtree+` AND NOT is_dir ORDER BY path`,
				threadID, lo, hi)
			if err != nil {
				return dbError(op, err)
			}
			var c candidate
			if _, err := pgx.ForEachRow(rows, []any{&c.path, &c.size}, func() error { cands = append(cands, c); return nil }); err != nil {
				return dbError(op, err)
			}
		}
		// Contents are fetched in batches of admitted files, in path order.
		for len(cands) > 0 {
			var batch []string
			var size int64
			stop := false
			for len(cands) > 0 && len(batch) < grepBatchFiles && (len(batch) == 0 || size+cands[0].size <= grepBatchBytes) {
				if !g.Admit(cands[0].size) {
					stop = true
					break
				}
				batch = append(batch, cands[0].path)
				size += cands[0].size
				cands = cands[1:]
			}
			if len(batch) > 0 {
				rows, err := tx.Query(ctx, `SELECT path, data FROM files WHERE thread_id = $1 AND path = ANY($2::text[]) AND NOT is_dir ORDER BY path`,
					threadID, batch)
				if err != nil {
					return dbError(op, err)
				}
				var p string
				var data []byte
				for rows.Next() {
					if err := rows.Scan(&p, &data); err != nil {
						rows.Close()
						return dbError(op, err)
					}
					if !g.Scan(p, data) {
						stop = true
						break
					}
				}
				rows.Close()
				if err := rows.Err(); err != nil {
					return dbError(op, err)
				}
			}
			if stop {
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
func (f *pgFiles) Find(ctx context.Context, workspaceID, threadID, root, pattern string) ([]string, bool, error) {
	op := "find in " + root
	if err := store.CheckPath(root); err != nil {
		return nil, false, err
	}
	search, err := store.NewFindSearch(root, pattern, f.lim)
	if err != nil {
		return nil, false, err
	}
	err = f.read(ctx, op, workspaceID, threadID, func(tx pgx.Tx) error {
		top, err := pgStat(ctx, tx, op, threadID, root)
		if err != nil {
			return err
		}
		if !top.IsDir {
			return fmt.Errorf("postgres: %s: it is a file, not a directory: %w", op, store.ErrInvalid)
		}
		lo, hi := pgSubtreeArgs(root)
		rows, err := tx.Query(ctx, `SELECT path FROM files WHERE thread_id = $1 AND `+pgSubtree+` ORDER BY path`, threadID, lo, hi)
		if err != nil {
			return dbError(op, err)
		}
		defer rows.Close()
		var p string
		for rows.Next() {
			if err := rows.Scan(&p); err != nil {
				return dbError(op, err)
			}
			if !search.Add(p) {
				return nil
			}
		}
		if err := rows.Err(); err != nil {
			return dbError(op, err)
		}
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	paths, truncated := search.Result()
	return paths, truncated, nil
}

// pgFreshAttachmentPath returns p, or another attachment path when p is taken (which 64 random
// bits make all but impossible).
func pgFreshAttachmentPath(ctx context.Context, tx pgx.Tx, op, threadID, p, name, mimeType string, now time.Time) (string, error) {
	for range 8 {
		var taken bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT FROM files WHERE thread_id = $1 AND path = $2)`, threadID, p).Scan(&taken); err != nil {
			return "", dbError(op, err)
		}
		if !taken {
			return p, nil
		}
		p = store.AttachmentPath(name, mimeType, now)
	}
	return "", fmt.Errorf("postgres: %s: no free attachment name found: %w", op, store.ErrExists)
}

// AddAttachment implements store.Files.AddAttachment.
func (f *pgFiles) AddAttachment(ctx context.Context, workspaceID, threadID string, a store.NewAttachment) (*store.FileInfo, error) {
	op := "add attachment"
	_, meta, err := store.PrepareAttachment(f.lim, a, time.Now())
	if err != nil {
		return nil, err
	}
	var out *store.FileInfo
	err = f.change(ctx, op, workspaceID, threadID, func(tx pgx.Tx, u *pgFileUsage) error {
		dirs, err := pgMissingDirs(ctx, tx, op, threadID, []string{store.AttachmentsDir})
		if err != nil {
			return err
		}
		if err := u.add(int64(len(a.Data)), int64(len(dirs))+1); err != nil {
			return err
		}
		if err := pgMkdirs(ctx, tx, op, threadID, dirs, u.now); err != nil {
			return err
		}
		// Named by the database clock, like every time of this backend.
		p, err := pgFreshAttachmentPath(ctx, tx, op, threadID, store.AttachmentPath(a.Name, meta.MimeType, u.now), a.Name, meta.MimeType, u.now)
		if err != nil {
			return err
		}
		out, err = pgPut(ctx, tx, op, threadID, p, a.Data, meta, u.now)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// CopyFiles implements store.Files.CopyFiles.
func (f *pgFiles) CopyFiles(ctx context.Context, workspaceID, fromThreadID string, paths []string, toThreadID string) ([]*store.FileInfo, error) {
	op := fmt.Sprintf("copy files from thread %s to thread %s", fromThreadID, toThreadID)
	var unique []string
	seen := map[string]bool{}
	for _, p := range paths {
		if err := store.CheckPath(p); err != nil {
			return nil, err
		}
		if p == "/" {
			return nil, fmt.Errorf("postgres: %s: / is a directory: %w", op, store.ErrInvalid)
		}
		if !seen[p] {
			seen[p] = true
			unique = append(unique, p)
		}
	}
	copies := map[string]*store.FileInfo{}
	err := f.change(ctx, op, workspaceID, toThreadID, func(tx pgx.Tx, u *pgFileUsage) error {
		if err := pgThreadExists(ctx, tx, op, workspaceID, fromThreadID); err != nil {
			return err
		}
		var srcs []*store.FileInfo
		var total int64
		for _, p := range unique {
			// FOR SHARE: a source removed or replaced meanwhile waits for the copy.
			fi, err := scanPGFile(tx.QueryRow(ctx, `SELECT `+pgFileCols+` FROM files WHERE thread_id = $1 AND path = $2 FOR SHARE`, fromThreadID, p))
			if errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("postgres: %s: no file %s: %w", op, p, store.ErrNotFound)
			}
			if err != nil {
				return dbError(op, err)
			}
			if fi.IsDir {
				return fmt.Errorf("postgres: %s: %s is a directory: %w", op, p, store.ErrInvalid)
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
		dirs, err := pgMissingDirs(ctx, tx, op, toThreadID, []string{store.AttachmentsDir})
		if err != nil {
			return err
		}
		if err := u.add(total, int64(len(dirs)+len(srcs))); err != nil {
			return err
		}
		if err := pgMkdirs(ctx, tx, op, toThreadID, dirs, u.now); err != nil {
			return err
		}
		for _, src := range srcs {
			p, err := pgFreshAttachmentPath(ctx, tx, op, toThreadID, store.AttachmentPath(src.Name, src.MimeType, u.now), src.Name, src.MimeType, u.now)
			if err != nil {
				return err
			}
			c := *src
			c.ID, c.Path, c.Name, c.ModTime = store.NewID(store.PrefixFile), p, store.BaseName(p), u.now
			// The content is copied inside the database, never through this process.
			tag, err := tx.Exec(ctx, `INSERT INTO files
	(thread_id, path, parent, id, is_dir, size, mime_type, width, height, description, mod_time, data)
SELECT $1, $2, $3, $4, false, size, mime_type, width, height, description, $5, data
FROM files WHERE thread_id = $6 AND path = $7`, toThreadID, c.Path, store.AttachmentsDir, c.ID, u.now, fromThreadID, src.Path)
			if err != nil {
				return dbError(op+": "+src.Path, err)
			}
			if tag.RowsAffected() != 1 {
				return fmt.Errorf("postgres: %s: %s vanished during the copy: %w", op, src.Path, store.ErrNotFound)
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
