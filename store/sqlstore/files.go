package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/quiverhq/quiver/internal/stamp"
	"github.com/quiverhq/quiver/store"
)

// Files implements store.Files, the thread file system (migration 0002), for both backends,
// which embed it.
//
// It lives in two tables: files, one row per file or directory with its content (a BLOB, a
// bytea), and file_usage, the bytes and entries each thread holds, kept by every change in the
// same transaction so that the caps are checked without summing. Every change first locks the
// thread's file_usage row (creating it when missing), so changes to one thread's files take
// turns, also across connections and nodes where writers run side by side: the caps hold under
// concurrent writers, a mkdir -p never races a rmdir, and the last of several writers of a path
// wins whole. The lock is not the thread row's, so appends to the thread's messages go on
// meanwhile. Reads that need more than one query run in one read transaction (Dialect.ReadTx),
// so they see one snapshot.
type Files struct {
	db
	lim store.FileLimits
}

var _ store.Files = (*Files)(nil)

// WithFileLimits returns the same file system with other caps than the defaults; zero fields of
// l keep their default. Every node sharing a database should use the same caps.
func (f *Files) WithFileLimits(l store.FileLimits) store.Files {
	c := *f
	c.lim = l.WithDefaults()
	return &c
}

// fileCols are read by scanFile, in this order.
const fileCols = `path, id, is_dir, size, mime_type, width, height, description, original_name, mod_time`

func scanFile(row scanner, extra ...any) (*store.FileInfo, error) {
	var fi store.FileInfo
	if err := row.Scan(append([]any{&fi.Path, &fi.ID, &fi.IsDir, &fi.Size, &fi.MimeType, &fi.Width, &fi.Height, &fi.Description,
		&fi.OriginalName, scanTime{&fi.ModTime}}, extra...)...); err != nil {
		return nil, err
	}
	fi.Name = store.BaseName(fi.Path)
	return &fi, nil
}

func rootInfo() *store.FileInfo { return &store.FileInfo{Path: "/", Name: "/", IsDir: true} }

// fileUsage is what a thread's files hold, as a change goes, and the time of the change.
type fileUsage struct {
	thread         string
	lim            store.FileLimits
	bytes, entries int64
	changed        bool
	now            time.Time
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

// change runs fn in a write transaction holding the lock on the thread's file system (its
// file_usage row), once the thread is found in the workspace, then stores the usage as fn left
// it.
func (f *Files) change(ctx context.Context, op, workspaceID, threadID string, fn func(ctx context.Context, tx Querier, u *fileUsage) error) error {
	return f.write(ctx, func(ctx context.Context, tx Querier) error {
		u := &fileUsage{thread: threadID, lim: f.lim}
		// The no-op update takes the row's lock where there is one to take.
		err := tx.QueryRowContext(ctx, `INSERT INTO file_usage (thread_id) SELECT id FROM threads WHERE id = $1 AND workspace_id = $2
			ON CONFLICT (thread_id) DO UPDATE SET bytes = file_usage.bytes
			RETURNING bytes, entries`, threadID, workspaceID).Scan(&u.bytes, &u.entries)
		if errors.Is(err, sql.ErrNoRows) {
			return f.d.failf(op, store.ErrNotFound, "thread %s", threadID)
		}
		if err != nil {
			return f.d.Err(op, err)
		}
		if u.now, err = f.d.Now(ctx, tx); err != nil {
			return f.d.Err(op, err)
		}
		if err := fn(ctx, tx, u); err != nil {
			return err
		}
		if u.changed {
			if _, err := tx.ExecContext(ctx, `UPDATE file_usage SET bytes = $1, entries = $2 WHERE thread_id = $3`,
				u.bytes, u.entries, threadID); err != nil {
				return f.d.Err(op, err)
			}
		}
		return nil
	})
}

// readTx runs fn in a read transaction once the thread is found in the workspace.
func (f *Files) readTx(ctx context.Context, op, workspaceID, threadID string, fn func(tx Querier) error) (err error) {
	defer func() { err = readErr(ctx, err) }()
	tx, err := f.read.BeginTx(ctx, f.d.ReadTx)
	if err != nil {
		return f.d.Err(op, err)
	}
	defer tx.Rollback() // read only: nothing to commit
	if err := f.d.threadExists(ctx, tx, op, workspaceID, threadID); err != nil {
		return err
	}
	return fn(tx)
}

// readErr makes a read that failed because its context ended say so: database/sql rolls a
// transaction back as soon as its context ends, and the statements after that fail with errors
// ("sql: transaction has already been committed or rolled back") that hide the cancellation a
// caller needs to see to know the read may be tried again.
func readErr(ctx context.Context, err error) error {
	if cerr := ctx.Err(); err != nil && cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("%w (the read's context ended: %w)", err, cerr)
	}
	return err
}

// stat returns the entry at p ("/" included), or store.ErrNotFound.
func (f *Files) stat(ctx context.Context, q Querier, op, threadID, p string) (*store.FileInfo, error) {
	if p == "/" {
		return rootInfo(), nil
	}
	fi, err := scanFile(q.QueryRowContext(ctx, `SELECT `+fileCols+` FROM files WHERE thread_id = $1 AND path = $2`, threadID, p))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, f.d.failf(op, store.ErrNotFound, "no file or directory %s", p)
	}
	if err != nil {
		return nil, f.d.Err(op, err)
	}
	return fi, nil
}

// statOne reads the entry at p with the thread check in the same query (one statement, no
// transaction), and its content too when data is not nil.
func (f *Files) statOne(ctx context.Context, op, workspaceID, threadID, p string, data *[]byte) (*store.FileInfo, error) {
	if p == "/" {
		if err := f.d.threadExists(ctx, f.read, op, workspaceID, threadID); err != nil {
			return nil, readErr(ctx, err)
		}
		return rootInfo(), nil
	}
	content := ""
	if data != nil {
		content = ", f.data"
	}
	var (
		path, id, mime, desc sql.NullString
		original             sql.NullString
		isDir                sql.NullBool
		size, width, height  sql.NullInt64
		mod                  *time.Time
		buf                  []byte
	)
	dest := []any{&path, &id, &isDir, &size, &mime, &width, &height, &desc, &original, scanNullTime{&mod}}
	if data != nil {
		dest = append(dest, &buf)
	}
	// Every column of f is NULL when the thread has no entry at p.
	err := f.read.QueryRowContext(ctx, `SELECT f.path, f.id, f.is_dir, f.size, f.mime_type, f.width, f.height, f.description, f.original_name, f.mod_time`+content+`
		FROM threads t LEFT JOIN files f ON f.thread_id = t.id AND f.path = $2
		WHERE t.id = $1 AND t.workspace_id = $3`, threadID, p, workspaceID).Scan(dest...)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, f.d.failf(op, store.ErrNotFound, "thread %s", threadID)
	case err != nil:
		return nil, f.d.Err(op, readErr(ctx, err))
	case !path.Valid:
		return nil, f.d.failf(op, store.ErrNotFound, "no file or directory %s", p)
	}
	fi := &store.FileInfo{Path: path.String, Name: store.BaseName(path.String), ID: id.String, IsDir: isDir.Bool, Size: size.Int64,
		MimeType: mime.String, Width: int(width.Int64), Height: int(height.Int64), Description: desc.String,
		OriginalName: original.String, ModTime: *mod}
	if data != nil {
		*data = buf
	}
	return fi, nil
}

// inList appends values to args and returns the parameters naming them: "$3, $4, $5".
func inList(args *[]any, values []string) string {
	var b strings.Builder
	for i, v := range values {
		*args = append(*args, v)
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("$" + strconv.Itoa(len(*args)))
	}
	return b.String()
}

// missingDirs returns the directories of dirs (top down) that do not exist, or store.ErrInvalid
// when one of them is a file.
func (f *Files) missingDirs(ctx context.Context, tx Querier, op, threadID string, dirs []string) ([]string, error) {
	if len(dirs) == 0 {
		return nil, nil
	}
	args := []any{threadID}
	rows, err := tx.QueryContext(ctx, `SELECT path, is_dir FROM files WHERE thread_id = $1 AND path IN (`+inList(&args, dirs)+`)`, args...)
	if err != nil {
		return nil, f.d.Err(op, err)
	}
	defer rows.Close()
	found := map[string]bool{}
	for rows.Next() {
		var p string
		var isDir bool
		if err := rows.Scan(&p, &isDir); err != nil {
			return nil, f.d.Err(op, err)
		}
		if !isDir {
			return nil, f.d.failf(op, store.ErrInvalid, "%s is a file, not a directory", p)
		}
		found[p] = true
	}
	if err := rows.Err(); err != nil {
		return nil, f.d.Err(op, err)
	}
	var out []string
	for _, d := range dirs {
		if !found[d] {
			out = append(out, d)
		}
	}
	return out, nil
}

const insertFile = `INSERT INTO files (thread_id, path, parent, id, is_dir, size, mime_type, width, height, description, mod_time, data,
	original_name) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`

// mkdirs creates the directories dirs (top down, none existing).
func (f *Files) mkdirs(ctx context.Context, tx Querier, op, threadID string, dirs []string, now time.Time) error {
	for _, d := range dirs {
		if _, err := tx.ExecContext(ctx, insertFile, threadID, d, store.ParentDir(d), stamp.ID(ctx, store.PrefixFile), true, 0, "", 0, 0, "",
			f.d.Time(now), nil, ""); err != nil {
			return f.d.Err(op+": create directory "+d, err)
		}
	}
	return nil
}

// newFileInfo describes a file about to be written at p.
func newFileInfo(ctx context.Context, p string, data []byte, meta store.FileMeta, now time.Time) *store.FileInfo {
	return &store.FileInfo{ID: stamp.ID(ctx, store.PrefixFile), Path: p, Name: store.BaseName(p), Size: int64(len(data)),
		MimeType: meta.MimeType, Width: meta.Width, Height: meta.Height, Description: meta.Description,
		OriginalName: meta.OriginalName, ModTime: now}
}

// put writes a file at p, which holds nothing, and returns its description.
func (f *Files) put(ctx context.Context, tx Querier, op, threadID, p string, data []byte, meta store.FileMeta, now time.Time) (*store.FileInfo, error) {
	fi := newFileInfo(ctx, p, data, meta, now)
	if data == nil {
		data = []byte{} // NULL is for directories
	}
	if _, err := tx.ExecContext(ctx, insertFile, threadID, p, store.ParentDir(p), fi.ID, false, fi.Size, fi.MimeType, fi.Width,
		fi.Height, fi.Description, f.d.Time(now), data, fi.OriginalName); err != nil {
		return nil, f.d.Err(op, err)
	}
	return fi, nil
}

// WriteFile implements store.Files.WriteFile.
func (f *Files) WriteFile(ctx context.Context, workspaceID, threadID, p string, data []byte, meta store.FileMeta) (*store.FileInfo, error) {
	op := "write " + p
	meta, err := store.PrepareWrite(f.lim, p, data, meta)
	if err != nil {
		return nil, err
	}
	var out *store.FileInfo
	err = f.change(ctx, op, workspaceID, threadID, func(ctx context.Context, tx Querier, u *fileUsage) error {
		old, err := f.stat(ctx, tx, op, threadID, p)
		switch {
		case err == nil && old.IsDir:
			return f.d.failf(op, store.ErrInvalid, "it is a directory")
		case err == nil:
			out, err = f.overwrite(ctx, tx, u, op, threadID, p, old.Size, data, meta)
		case errors.Is(err, store.ErrNotFound):
			out, err = f.create(ctx, tx, u, op, threadID, p, data, meta)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// overwrite writes data over the file at p, of oldSize bytes. An UPDATE rather than DELETE and
// INSERT: a copy holding the row (FOR SHARE) then sees the new version, not a deleted row.
func (f *Files) overwrite(ctx context.Context, tx Querier, u *fileUsage, op, threadID, p string, oldSize int64, data []byte,
	meta store.FileMeta) (*store.FileInfo, error) {
	if err := u.add(int64(len(data))-oldSize, 0); err != nil {
		return nil, err
	}
	out := newFileInfo(ctx, p, data, meta, u.now)
	if data == nil {
		data = []byte{}
	}
	if _, err := tx.ExecContext(ctx, `UPDATE files SET id = $1, size = $2, mime_type = $3, width = $4, height = $5, description = $6,
		mod_time = $7, data = $8, original_name = $11 WHERE thread_id = $9 AND path = $10`,
		out.ID, out.Size, out.MimeType, out.Width, out.Height, out.Description, f.d.Time(u.now), data, threadID, p, out.OriginalName); err != nil {
		return nil, f.d.Err(op, err)
	}
	return out, nil
}

// create writes a new file at p, making the directories above it that are missing.
func (f *Files) create(ctx context.Context, tx Querier, u *fileUsage, op, threadID, p string, data []byte,
	meta store.FileMeta) (*store.FileInfo, error) {
	dirs, err := f.missingDirs(ctx, tx, op, threadID, store.Ancestors(p))
	if err != nil {
		return nil, err
	}
	if err := u.add(int64(len(data)), int64(len(dirs))+1); err != nil {
		return nil, err
	}
	if err := f.mkdirs(ctx, tx, op, threadID, dirs, u.now); err != nil {
		return nil, err
	}
	return f.put(ctx, tx, op, threadID, p, data, meta, u.now)
}

// ReadFile implements store.Files.ReadFile.
func (f *Files) ReadFile(ctx context.Context, workspaceID, threadID, p string) ([]byte, *store.FileInfo, error) {
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
		return nil, nil, f.d.failf(op, store.ErrInvalid, "it is a directory")
	}
	if data == nil {
		data = []byte{}
	}
	return data, fi, nil
}

// Stat implements store.Files.Stat.
func (f *Files) Stat(ctx context.Context, workspaceID, threadID, p string) (*store.FileInfo, error) {
	if err := store.CheckPath(p); err != nil {
		return nil, err
	}
	return f.statOne(ctx, "stat "+p, workspaceID, threadID, p, nil)
}

// ReadDir implements store.Files.ReadDir.
func (f *Files) ReadDir(ctx context.Context, workspaceID, threadID, p string) ([]*store.FileInfo, error) {
	op := "read directory " + p
	if err := store.CheckPath(p); err != nil {
		return nil, err
	}
	out := []*store.FileInfo{}
	err := f.readTx(ctx, op, workspaceID, threadID, func(tx Querier) error {
		dir, err := f.stat(ctx, tx, op, threadID, p)
		if err != nil {
			return err
		}
		if !dir.IsDir {
			return f.d.failf(op, store.ErrInvalid, "it is a file, not a directory")
		}
		rows, err := tx.QueryContext(ctx, `SELECT `+fileCols+` FROM files WHERE thread_id = $1 AND parent = $2 ORDER BY path`, threadID, p)
		if err != nil {
			return f.d.Err(op, err)
		}
		entries, err := collect(&f.d, rows, op, func(row scanner) (*store.FileInfo, error) { return scanFile(row) })
		out = append(out, entries...)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Remove implements store.Files.Remove.
func (f *Files) Remove(ctx context.Context, workspaceID, threadID, p string) error {
	op := "remove " + p
	if err := store.CheckPath(p); err != nil {
		return err
	}
	return f.change(ctx, op, workspaceID, threadID, func(ctx context.Context, tx Querier, u *fileUsage) error {
		fi, err := f.stat(ctx, tx, op, threadID, p)
		if err != nil {
			return err
		}
		if fi.IsDir {
			return f.d.failf(op, store.ErrInvalid, "it is a directory (remove it with Rmdir)")
		}
		if err := u.add(-fi.Size, -1); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM files WHERE thread_id = $1 AND path = $2`, threadID, p)
		return f.d.Err(op, err)
	})
}

// Mkdir implements store.Files.Mkdir.
func (f *Files) Mkdir(ctx context.Context, workspaceID, threadID, p string) (*store.FileInfo, error) {
	op := "make directory " + p
	if err := store.CheckPath(p); err != nil {
		return nil, err
	}
	if p == "/" { // after the thread check: a thread the workspace does not have is not found
		if _, err := f.statOne(ctx, op, workspaceID, threadID, p, nil); err != nil {
			return nil, err
		}
		return nil, f.d.failf(op, store.ErrExists, "the root directory always exists")
	}
	var out *store.FileInfo
	err := f.change(ctx, op, workspaceID, threadID, func(ctx context.Context, tx Querier, u *fileUsage) error {
		var err error
		out, err = f.mkdir(ctx, tx, u, op, threadID, p)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// mkdir makes the directory p, which must not exist, and those above it that are missing.
func (f *Files) mkdir(ctx context.Context, tx Querier, u *fileUsage, op, threadID, p string) (*store.FileInfo, error) {
	old, err := f.stat(ctx, tx, op, threadID, p)
	switch {
	case err == nil && old.IsDir:
		return nil, f.d.failf(op, store.ErrExists, "the directory exists")
	case err == nil:
		return nil, f.d.failf(op, store.ErrExists, "a file exists there")
	case !errors.Is(err, store.ErrNotFound):
		return nil, err
	}
	dirs, err := f.missingDirs(ctx, tx, op, threadID, store.Ancestors(p))
	if err != nil {
		return nil, err
	}
	dirs = append(dirs, p)
	if err := u.add(0, int64(len(dirs))); err != nil {
		return nil, err
	}
	if err := f.mkdirs(ctx, tx, op, threadID, dirs, u.now); err != nil {
		return nil, err
	}
	return f.stat(ctx, tx, op, threadID, p)
}

// Rmdir implements store.Files.Rmdir.
func (f *Files) Rmdir(ctx context.Context, workspaceID, threadID, p string) error {
	op := "remove directory " + p
	if err := store.CheckPath(p); err != nil {
		return err
	}
	if p == "/" {
		if _, err := f.statOne(ctx, op, workspaceID, threadID, p, nil); err != nil {
			return err
		}
		return f.d.failf(op, store.ErrInvalid, "the root directory cannot be removed")
	}
	return f.change(ctx, op, workspaceID, threadID, func(ctx context.Context, tx Querier, u *fileUsage) error {
		fi, err := f.stat(ctx, tx, op, threadID, p)
		if err != nil {
			return err
		}
		if !fi.IsDir {
			return f.d.failf(op, store.ErrInvalid, "it is a file (remove it with Remove)")
		}
		var busy bool
		if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM files WHERE thread_id = $1 AND parent = $2)`, threadID, p).Scan(&busy); err != nil {
			return f.d.Err(op, err)
		}
		if busy {
			return f.d.failf(op, store.ErrInvalid, "the directory is not empty")
		}
		if err := u.add(0, -1); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM files WHERE thread_id = $1 AND path = $2`, threadID, p)
		return f.d.Err(op, err)
	})
}
