package thread

import (
	"context"
	"fmt"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/store"
)

// Files is the thread's file system, stored in the database: see store.Files for the
// rules every operation follows (checked paths, size caps, all-or-nothing changes).
type Files struct{ t *Thread }

// Files returns the thread's file system.
func (t *Thread) Files() Files { return Files{t} }

// Write creates or replaces the file at path.
func (f Files) Write(ctx context.Context, path string, data []byte, meta store.FileMeta) (*store.FileInfo, error) {
	return f.t.st.WriteFile(ctx, f.t.ws, f.t.id, path, data, meta)
}

// Read returns the content and description of the file at path.
func (f Files) Read(ctx context.Context, path string) ([]byte, *store.FileInfo, error) {
	return f.t.st.ReadFile(ctx, f.t.ws, f.t.id, path)
}

// Stat describes the file or directory at path.
func (f Files) Stat(ctx context.Context, path string) (*store.FileInfo, error) {
	return f.t.st.Stat(ctx, f.t.ws, f.t.id, path)
}

// ReadDir lists the directory at path.
func (f Files) ReadDir(ctx context.Context, path string) ([]*store.FileInfo, error) {
	return f.t.st.ReadDir(ctx, f.t.ws, f.t.id, path)
}

// Unlink deletes the file at path.
func (f Files) Unlink(ctx context.Context, path string) error {
	return f.t.st.Remove(ctx, f.t.ws, f.t.id, path)
}

// Mkdir creates the directory at path and its missing parents.
func (f Files) Mkdir(ctx context.Context, path string) (*store.FileInfo, error) {
	return f.t.st.Mkdir(ctx, f.t.ws, f.t.id, path)
}

// Rmdir deletes the empty directory at path.
func (f Files) Rmdir(ctx context.Context, path string) error {
	return f.t.st.Rmdir(ctx, f.t.ws, f.t.id, path)
}

// Grep returns the lines matching pattern in the files at or under root.
func (f Files) Grep(ctx context.Context, root, pattern string) ([]store.GrepMatch, bool, error) {
	return f.t.st.Grep(ctx, f.t.ws, f.t.id, root, pattern)
}

// Find returns the paths under root matching a glob pattern.
func (f Files) Find(ctx context.Context, root, pattern string) ([]string, bool, error) {
	return f.t.st.Find(ctx, f.t.ws, f.t.id, root, pattern)
}

// CopyAttachments brings attachments of a result crossing from thread from into f's thread
// (a child's result reaching its parent, a parent's files given to a child): every
// referenced file is copied to a fresh path under /attachments/ of f's thread and the
// returned attachments point there. Attachments with data (not yet stored anywhere) pass
// through, to be stored when the result is recorded. All are copied or none.
func (f Files) CopyAttachments(ctx context.Context, from *Thread, atts []quiver.Attachment) ([]quiver.Attachment, error) {
	if from.ws != f.t.ws {
		return nil, fmt.Errorf("thread: attachments cannot cross workspaces: %w", store.ErrNotFound)
	}
	var paths []string
	for _, a := range atts {
		if a.IsRef() {
			paths = append(paths, a.Path)
		}
	}
	out := append([]quiver.Attachment(nil), atts...)
	if len(paths) == 0 {
		return out, nil
	}
	copies, err := f.t.st.CopyFiles(ctx, f.t.ws, from.id, paths, f.t.id)
	if err != nil {
		return nil, err
	}
	j := 0
	for i := range out {
		if out[i].IsRef() {
			desc := out[i].Description
			out[i] = AttachmentRef(copies[j])
			if out[i].Description == "" {
				out[i].Description = desc
			}
			j++
		}
	}
	return out, nil
}
