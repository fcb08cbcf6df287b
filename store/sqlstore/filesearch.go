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
