package sqlstore

import (
	"context"

	"github.com/quiverhq/quiver/store"
)

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
		cands, err := f.grepCandidates(ctx, tx, op, threadID, root)
		if err != nil {
			return err
		}
		return f.grepAll(ctx, tx, op, threadID, cands, g)
	})
	if err != nil {
		return nil, false, err
	}
	matches, truncated := g.Result()
	return matches, truncated, nil
}

// grepCandidate is a file Grep may scan.
type grepCandidate struct {
	path string
	size int64
}

// grepCandidates are the files under root, or root itself when it is a file, in path order.
func (f *Files) grepCandidates(ctx context.Context, tx Querier, op, threadID, root string) ([]grepCandidate, error) {
	top, err := f.stat(ctx, tx, op, threadID, root)
	if err != nil {
		return nil, err
	}
	if !top.IsDir {
		return []grepCandidate{{top.Path, top.Size}}, nil
	}
	lo, hi := subtreeArgs(root)
	rows, err := tx.QueryContext(ctx, `SELECT path, size FROM files WHERE thread_id = $1 AND `+subtree+` AND NOT is_dir ORDER BY path`,
		threadID, lo, hi)
	if err != nil {
		return nil, f.d.Err(op, err)
	}
	return collect(&f.d, rows, op, func(row scanner) (c grepCandidate, err error) { return c, row.Scan(&c.path, &c.size) })
}

// grepAll scans the contents of cands, fetched in batches of admitted files, in path order.
func (f *Files) grepAll(ctx context.Context, tx Querier, op, threadID string, cands []grepCandidate, g *store.GrepSearch) error {
	for len(cands) > 0 {
		var batch []string
		var refused bool
		batch, cands, refused = nextGrepBatch(cands, g)
		stop := refused
		if len(batch) > 0 {
			var err error
			if stop, err = f.grepBatch(ctx, tx, op, threadID, batch, g); err != nil {
				return err
			}
		}
		if stop {
			return nil
		}
	}
	return nil
}

// nextGrepBatch takes from cands the files of the next batch, as long as the search admits
// them, and reports whether it refused one.
func nextGrepBatch(cands []grepCandidate, g *store.GrepSearch) (batch []string, rest []grepCandidate, refused bool) {
	var size int64
	for len(cands) > 0 && fitsGrepBatch(len(batch), size, cands[0].size) {
		if !g.Admit(cands[0].size) {
			return batch, cands, true
		}
		batch = append(batch, cands[0].path)
		size += cands[0].size
		cands = cands[1:]
	}
	return batch, cands, false
}

// fitsGrepBatch reports whether a file of next bytes fits a batch of files holding size bytes:
// a batch holds at most grepBatchFiles, and grepBatchBytes unless one file alone is larger.
func fitsGrepBatch(files int, size, next int64) bool {
	return files < grepBatchFiles && (files == 0 || size+next <= grepBatchBytes)
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
