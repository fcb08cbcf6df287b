package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/quiverhq/quiver/internal/stamp"
	"github.com/quiverhq/quiver/store"
)

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
		p = store.AttachmentPath(ctx, name, mimeType, now)
	}
	return "", f.d.failf(op, store.ErrExists, "no free attachment name found")
}

// AddAttachment implements store.Files.AddAttachment.
func (f *Files) AddAttachment(ctx context.Context, workspaceID, threadID string, a store.NewAttachment) (*store.FileInfo, error) {
	op := "add attachment"
	_, meta, err := store.PrepareAttachment(ctx, f.lim, a, stamp.Now(ctx))
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
		p, err := f.freshAttachmentPath(ctx, tx, op, threadID, store.AttachmentPath(ctx, a.Name, meta.MimeType, u.now), a.Name, meta.MimeType, u.now)
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
	unique, err := f.copyPaths(op, paths)
	if err != nil {
		return nil, err
	}
	var copies map[string]*store.FileInfo
	err = f.change(ctx, op, workspaceID, toThreadID, func(ctx context.Context, tx Querier, u *fileUsage) error {
		var err error
		copies, err = f.copyFiles(ctx, tx, u, op, workspaceID, fromThreadID, unique, toThreadID)
		return err
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

// copyFiles copies the files at paths, inside the write transaction, and returns the copies
// by the path copied.
func (f *Files) copyFiles(ctx context.Context, tx Querier, u *fileUsage, op, workspaceID, fromThreadID string, paths []string,
	toThreadID string) (map[string]*store.FileInfo, error) {
	if err := f.d.threadExists(ctx, tx, op, workspaceID, fromThreadID); err != nil {
		return nil, err
	}
	srcs, total, err := f.lockCopySources(ctx, tx, op, fromThreadID, paths)
	if err != nil || len(srcs) == 0 {
		return nil, err
	}
	dirs, err := f.missingDirs(ctx, tx, op, toThreadID, []string{store.AttachmentsDir})
	if err != nil {
		return nil, err
	}
	if err := u.add(total, int64(len(dirs)+len(srcs))); err != nil {
		return nil, err
	}
	if err := f.mkdirs(ctx, tx, op, toThreadID, dirs, u.now); err != nil {
		return nil, err
	}
	copies := map[string]*store.FileInfo{}
	for _, src := range srcs {
		c, err := f.copyAttachment(ctx, tx, op, fromThreadID, toThreadID, src, u.now)
		if err != nil {
			return nil, err
		}
		copies[src.Path] = c
	}
	return copies, nil
}

// copyPaths checks the paths to copy and drops repeats, keeping the first of each.
func (f *Files) copyPaths(op string, paths []string) ([]string, error) {
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
	return unique, nil
}

// lockCopySources reads the files to copy and their total size, locking each so that a
// source removed or replaced meanwhile waits for the copy.
func (f *Files) lockCopySources(ctx context.Context, tx Querier, op, threadID string, paths []string) ([]*store.FileInfo, int64, error) {
	var srcs []*store.FileInfo
	var total int64
	for _, p := range paths {
		fi, err := scanFile(tx.QueryRowContext(ctx, `SELECT `+fileCols+` FROM files WHERE thread_id = $1 AND path = $2`+f.d.lock("FOR SHARE"),
			threadID, p))
		if errors.Is(err, sql.ErrNoRows) {
			return nil, 0, f.d.failf(op, store.ErrNotFound, "no file %s", p)
		}
		if err != nil {
			return nil, 0, f.d.Err(op, err)
		}
		if fi.IsDir {
			return nil, 0, f.d.failf(op, store.ErrInvalid, "%s is a directory", p)
		}
		if err := f.lim.CheckFileSize(p, fi.Size); err != nil {
			return nil, 0, err
		}
		srcs = append(srcs, fi)
		total += fi.Size
	}
	return srcs, total, nil
}

// copyAttachment copies src into a fresh attachment path of thread toThreadID and returns
// the copy. The content is copied inside the database, never through this process.
func (f *Files) copyAttachment(ctx context.Context, tx Querier, op, fromThreadID, toThreadID string, src *store.FileInfo, now time.Time) (*store.FileInfo, error) {
	p, err := f.freshAttachmentPath(ctx, tx, op, toThreadID, store.AttachmentPath(ctx, src.Name, src.MimeType, now), src.Name, src.MimeType, now)
	if err != nil {
		return nil, err
	}
	c := *src
	c.ID, c.Path, c.Name, c.ModTime = stamp.ID(ctx, store.PrefixFile), p, store.BaseName(p), now
	c.OriginalName = src.DisplayName() // the copy's path is a name of the store's making
	res, err := tx.ExecContext(ctx, `INSERT INTO files
		(thread_id, path, parent, id, is_dir, size, mime_type, width, height, description, mod_time, data, original_name)
		SELECT $1, $2, $3, $4, false, size, mime_type, width, height, description, $5, data, $8
		FROM files WHERE thread_id = $6 AND path = $7`,
		toThreadID, c.Path, store.AttachmentsDir, c.ID, f.d.Time(now), fromThreadID, src.Path, c.OriginalName)
	if err != nil {
		return nil, f.d.Err(op+": "+src.Path, err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return nil, f.d.failf(op, store.ErrNotFound, "%s vanished during the copy", src.Path)
	}
	return &c, nil
}
