package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

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
const fileCols = `path, id, is_dir, size, mime_type, width, height, description, mod_time`

func scanFile(row scanner, extra ...any) (*store.FileInfo, error) {
	var fi store.FileInfo
	if err := row.Scan(append([]any{&fi.Path, &fi.ID, &fi.IsDir, &fi.Size, &fi.MimeType, &fi.Width, &fi.Height, &fi.Description,
		scanTime{&fi.ModTime}}, extra...)...); err != nil {
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
		isDir                sql.NullBool
		size, width, height  sql.NullInt64
		mod                  *time.Time
		buf                  []byte
	)
	dest := []any{&path, &id, &isDir, &size, &mime, &width, &height, &desc, scanNullTime{&mod}}
	if data != nil {
		dest = append(dest, &buf)
	}
	// Every column of f is NULL when the thread has no entry at p.
	err := f.read.QueryRowContext(ctx, `SELECT f.path, f.id, f.is_dir, f.size, f.mime_type, f.width, f.height, f.description, f.mod_time`+content+`
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
		MimeType: mime.String, Width: int(width.Int64), Height: int(height.Int64), Description: desc.String, ModTime: *mod}
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

const insertFile = `INSERT INTO files (thread_id, path, parent, id, is_dir, size, mime_type, width, height, description, mod_time, data)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`

// mkdirs creates the directories dirs (top down, none existing).
func (f *Files) mkdirs(ctx context.Context, tx Querier, op, threadID string, dirs []string, now time.Time) error {
	for _, d := range dirs {
		if _, err := tx.ExecContext(ctx, insertFile, threadID, d, store.ParentDir(d), store.NewID(store.PrefixFile), true, 0, "", 0, 0, "",
			f.d.Time(now), nil); err != nil {
			return f.d.Err(op+": create directory "+d, err)
		}
	}
	return nil
}

// newFileInfo describes a file about to be written at p.
func newFileInfo(p string, data []byte, meta store.FileMeta, now time.Time) *store.FileInfo {
	return &store.FileInfo{ID: store.NewID(store.PrefixFile), Path: p, Name: store.BaseName(p), Size: int64(len(data)),
		MimeType: meta.MimeType, Width: meta.Width, Height: meta.Height, Description: meta.Description, ModTime: now}
}

// put writes a file at p, which holds nothing, and returns its description.
func (f *Files) put(ctx context.Context, tx Querier, op, threadID, p string, data []byte, meta store.FileMeta, now time.Time) (*store.FileInfo, error) {
	fi := newFileInfo(p, data, meta, now)
	if data == nil {
		data = []byte{} // NULL is for directories
	}
	if _, err := tx.ExecContext(ctx, insertFile, threadID, p, store.ParentDir(p), fi.ID, false, fi.Size, fi.MimeType, fi.Width,
		fi.Height, fi.Description, f.d.Time(now), data); err != nil {
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
			if err := u.add(int64(len(data))-old.Size, 0); err != nil {
				return err
			}
			// An UPDATE rather than DELETE and INSERT: a copy holding the row (FOR SHARE) then
			// sees the new version, not a deleted row.
			out = newFileInfo(p, data, meta, u.now)
			if data == nil {
				data = []byte{}
			}
			if _, err := tx.ExecContext(ctx, `UPDATE files SET id = $1, size = $2, mime_type = $3, width = $4, height = $5, description = $6,
				mod_time = $7, data = $8 WHERE thread_id = $9 AND path = $10`,
				out.ID, out.Size, out.MimeType, out.Width, out.Height, out.Description, f.d.Time(u.now), data, threadID, p); err != nil {
				return f.d.Err(op, err)
			}
			return nil
		case !errors.Is(err, store.ErrNotFound):
			return err
		}
		dirs, err := f.missingDirs(ctx, tx, op, threadID, store.Ancestors(p))
		if err != nil {
			return err
		}
		if err := u.add(int64(len(data)), int64(len(dirs))+1); err != nil {
			return err
		}
		if err := f.mkdirs(ctx, tx, op, threadID, dirs, u.now); err != nil {
			return err
		}
		out, err = f.put(ctx, tx, op, threadID, p, data, meta, u.now)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
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
		old, err := f.stat(ctx, tx, op, threadID, p)
		switch {
		case err == nil && old.IsDir:
			return f.d.failf(op, store.ErrExists, "the directory exists")
		case err == nil:
			return f.d.failf(op, store.ErrExists, "a file exists there")
		case !errors.Is(err, store.ErrNotFound):
			return err
		}
		dirs, err := f.missingDirs(ctx, tx, op, threadID, store.Ancestors(p))
		if err != nil {
			return err
		}
		dirs = append(dirs, p)
		if err := u.add(0, int64(len(dirs))); err != nil {
			return err
		}
		if err := f.mkdirs(ctx, tx, op, threadID, dirs, u.now); err != nil {
			return err
		}
		out, err = f.stat(ctx, tx, op, threadID, p)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
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

// subtree is the condition on path ($2 and $3: subtreeArgs) selecting the entries under the
// directory root, root excluded: paths compare byte by byte (SQLite's default; the "C"
// collation of PostgreSQL's path column), and those under "/a" are the ones from "/a/" up to
// "/a0" ('0' follows '/').
const subtree = `path >= $2 AND path < $3`

func subtreeArgs(root string) (lo, hi string) {
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
func (f *Files) Grep(ctx context.Context, workspaceID, threadID, root, pattern string) ([]store.GrepMatch, bool, error) {
	op := "grep " + root
	if err := store.CheckPath(root); err != nil {
		return nil, false, err
	}
	g, err := store.NewGrepSearch(pattern, f.lim)
	if err != nil {
		return nil, false, err
	}
	err = f.readTx(ctx, op, workspaceID, threadID, func(tx Querier) error {
		top, err := f.stat(ctx, tx, op, threadID, root)
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
			lo, hi := subtreeArgs(root)
			rows, err := tx.QueryContext(ctx, `SELECT path, size FROM files WHERE thread_id = $1 AND `+subtree+` AND NOT is_dir ORDER BY path`,
				threadID, lo, hi)
			if err != nil {
				return f.d.Err(op, err)
			}
			if cands, err = collect(&f.d, rows, op, func(row scanner) (c candidate, err error) { return c, row.Scan(&c.path, &c.size) }); err != nil {
				return err
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
				if stop, err = f.grepBatch(ctx, tx, op, threadID, batch, g); err != nil {
					return err
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

// grepBatch scans the contents of the files at paths, in path order; stop says the search has
// seen enough.
func (f *Files) grepBatch(ctx context.Context, tx Querier, op, threadID string, paths []string, g *store.GrepSearch) (stop bool, err error) {
	args := []any{threadID}
	rows, err := tx.QueryContext(ctx, `SELECT path, data FROM files WHERE thread_id = $1 AND path IN (`+inList(&args, paths)+`) AND NOT is_dir
		ORDER BY path`, args...)
	if err != nil {
		return false, f.d.Err(op, err)
	}
	defer rows.Close()
	var p string
	var data []byte
	for rows.Next() {
		if err := rows.Scan(&p, &data); err != nil {
			return false, f.d.Err(op, err)
		}
		if !g.Scan(p, data) {
			return true, nil
		}
	}
	return false, f.d.Err(op, rows.Err())
}

// Find implements store.Files.Find.
func (f *Files) Find(ctx context.Context, workspaceID, threadID, root, pattern string) ([]string, bool, error) {
	op := "find in " + root
	if err := store.CheckPath(root); err != nil {
		return nil, false, err
	}
	search, err := store.NewFindSearch(root, pattern, f.lim)
	if err != nil {
		return nil, false, err
	}
	err = f.readTx(ctx, op, workspaceID, threadID, func(tx Querier) error {
		top, err := f.stat(ctx, tx, op, threadID, root)
		if err != nil {
			return err
		}
		if !top.IsDir {
			return f.d.failf(op, store.ErrInvalid, "it is a file, not a directory")
		}
		lo, hi := subtreeArgs(root)
		rows, err := tx.QueryContext(ctx, `SELECT path FROM files WHERE thread_id = $1 AND `+subtree+` ORDER BY path`, threadID, lo, hi)
		if err != nil {
			return f.d.Err(op, err)
		}
		defer rows.Close()
		var p string
		for rows.Next() {
			if err := rows.Scan(&p); err != nil {
				return f.d.Err(op, err)
			}
			if !search.Add(p) {
				return nil
			}
		}
		return f.d.Err(op, rows.Err())
	})
	if err != nil {
		return nil, false, err
	}
	paths, truncated := search.Result()
	return paths, truncated, nil
}

// freshAttachmentPath returns p, or another attachment path when p is taken (which 64 random
// bits make all but impossible).
func (f *Files) freshAttachmentPath(ctx context.Context, tx Querier, op, threadID, p, name, mimeType string, now time.Time) (string, error) {
	for range 8 {
		var taken bool
		if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM files WHERE thread_id = $1 AND path = $2)`, threadID, p).Scan(&taken); err != nil {
			return "", f.d.Err(op, err)
		}
		if !taken {
			return p, nil
		}
		p = store.AttachmentPath(name, mimeType, now)
	}
	return "", f.d.failf(op, store.ErrExists, "no free attachment name found")
}

// AddAttachment implements store.Files.AddAttachment.
func (f *Files) AddAttachment(ctx context.Context, workspaceID, threadID string, a store.NewAttachment) (*store.FileInfo, error) {
	op := "add attachment"
	_, meta, err := store.PrepareAttachment(f.lim, a, time.Now())
	if err != nil {
		return nil, err
	}
	var out *store.FileInfo
	err = f.change(ctx, op, workspaceID, threadID, func(ctx context.Context, tx Querier, u *fileUsage) error {
		dirs, err := f.missingDirs(ctx, tx, op, threadID, []string{store.AttachmentsDir})
		if err != nil {
			return err
		}
		if err := u.add(int64(len(a.Data)), int64(len(dirs))+1); err != nil {
			return err
		}
		if err := f.mkdirs(ctx, tx, op, threadID, dirs, u.now); err != nil {
			return err
		}
		// Named by the time of the change, like every time the store writes.
		p, err := f.freshAttachmentPath(ctx, tx, op, threadID, store.AttachmentPath(a.Name, meta.MimeType, u.now), a.Name, meta.MimeType, u.now)
		if err != nil {
			return err
		}
		out, err = f.put(ctx, tx, op, threadID, p, a.Data, meta, u.now)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// CopyFiles implements store.Files.CopyFiles.
func (f *Files) CopyFiles(ctx context.Context, workspaceID, fromThreadID string, paths []string, toThreadID string) ([]*store.FileInfo, error) {
	op := fmt.Sprintf("copy files from thread %s to thread %s", fromThreadID, toThreadID)
	var unique []string
	seen := map[string]bool{}
	for _, p := range paths {
		if err := store.CheckPath(p); err != nil {
			return nil, err
		}
		if p == "/" {
			return nil, f.d.failf(op, store.ErrInvalid, "/ is a directory")
		}
		if !seen[p] {
			seen[p] = true
			unique = append(unique, p)
		}
	}
	copies := map[string]*store.FileInfo{}
	err := f.change(ctx, op, workspaceID, toThreadID, func(ctx context.Context, tx Querier, u *fileUsage) error {
		if err := f.d.threadExists(ctx, tx, op, workspaceID, fromThreadID); err != nil {
			return err
		}
		var srcs []*store.FileInfo
		var total int64
		for _, p := range unique {
			// Locked: a source removed or replaced meanwhile waits for the copy.
			fi, err := scanFile(tx.QueryRowContext(ctx, `SELECT `+fileCols+` FROM files WHERE thread_id = $1 AND path = $2`+f.d.lock("FOR SHARE"),
				fromThreadID, p))
			if errors.Is(err, sql.ErrNoRows) {
				return f.d.failf(op, store.ErrNotFound, "no file %s", p)
			}
			if err != nil {
				return f.d.Err(op, err)
			}
			if fi.IsDir {
				return f.d.failf(op, store.ErrInvalid, "%s is a directory", p)
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
		dirs, err := f.missingDirs(ctx, tx, op, toThreadID, []string{store.AttachmentsDir})
		if err != nil {
			return err
		}
		if err := u.add(total, int64(len(dirs)+len(srcs))); err != nil {
			return err
		}
		if err := f.mkdirs(ctx, tx, op, toThreadID, dirs, u.now); err != nil {
			return err
		}
		for _, src := range srcs {
			p, err := f.freshAttachmentPath(ctx, tx, op, toThreadID, store.AttachmentPath(src.Name, src.MimeType, u.now), src.Name, src.MimeType, u.now)
			if err != nil {
				return err
			}
			c := *src
			c.ID, c.Path, c.Name, c.ModTime = store.NewID(store.PrefixFile), p, store.BaseName(p), u.now
			// The content is copied inside the database, never through this process.
			res, err := tx.ExecContext(ctx, `INSERT INTO files
				(thread_id, path, parent, id, is_dir, size, mime_type, width, height, description, mod_time, data)
				SELECT $1, $2, $3, $4, false, size, mime_type, width, height, description, $5, data
				FROM files WHERE thread_id = $6 AND path = $7`,
				toThreadID, c.Path, store.AttachmentsDir, c.ID, f.d.Time(u.now), fromThreadID, src.Path)
			if err != nil {
				return f.d.Err(op+": "+src.Path, err)
			}
			if n, err := res.RowsAffected(); err != nil || n != 1 {
				return f.d.failf(op, store.ErrNotFound, "%s vanished during the copy", src.Path)
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
