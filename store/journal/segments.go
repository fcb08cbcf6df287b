package journal

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/quiverhq/quiver/internal/stamp"
	"github.com/quiverhq/quiver/store"
)

type segment struct {
	path    string
	f       *os.File
	size    int64
	pending int  // appends in this file not yet stored
	broken  bool // a write failed: its end may hold part of a frame, so append elsewhere
}

// record is an append as the journal stores it.
type record struct {
	WorkspaceID string           `json:"w"`
	ThreadID    string           `json:"t"`
	At          time.Time        `json:"at"`
	Messages    []*store.Message `json:"m"`
}

const (
	magic       = "quiverj1"
	frameHeader = 8
	maxPayload  = 256 << 20 // a length beyond this is damage, not an append
	fileSuffix  = ".journal"
	tmpSuffix   = ".new" // a file being started, not yet named *.journal
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// write puts one framed append at the end of the current file and queues it. j.mu is held.
func (j *Journal) write(frame []byte, op store.AppendOp) error {
	if j.cur.broken || j.cur.size > int64(len(magic)) && j.cur.size+int64(len(frame)) > j.opts.SegmentBytes {
		if err := j.rotate(); err != nil {
			return err
		}
	}
	seg := j.cur
	if _, err := seg.f.Write(frame); err != nil {
		// Take back a partial frame; should that fail too, a replay stops at it, so nothing
		// more goes into this file.
		seg.broken = seg.f.Truncate(seg.size) != nil
		return fmt.Errorf("writing %s: %w", seg.path, err)
	}
	if j.opts.Sync {
		if err := seg.f.Sync(); err != nil {
			// After a failed fsync the kernel may have dropped the file's dirty pages: what
			// was acknowledged before is still pending, but this file is not to be trusted.
			seg.broken = true
			_ = seg.f.Truncate(seg.size)
			return fmt.Errorf("syncing %s: %w", seg.path, err)
		}
	}
	seg.size += int64(len(frame))
	seg.pending++
	j.queue = append(j.queue, &entry{op: op, seg: seg})
	j.appended++
	j.pendingN.Store(int64(len(j.queue)))
	return nil
}

// rotate starts a new file for appends; the current one stays until everything in it is
// stored. j.mu is held (or the journal is not running yet).
func (j *Journal) rotate() error {
	j.nextSeg++
	path := filepath.Join(j.dir, fmt.Sprintf("%s-%06d%s", j.process, j.nextSeg, fileSuffix))
	f, err := startFile(path)
	if err != nil {
		return err
	}
	if j.opts.Sync {
		// A new file's name is durable once its directory is.
		if err := syncDir(j.dir); err != nil {
			f.Close()
			os.Remove(path)
			return fmt.Errorf("journal: starting %s: %w", path, err)
		}
	}
	old := j.cur
	j.cur = &segment{path: path, f: f, size: int64(len(magic))}
	j.segs = append(j.segs, j.cur)
	if old != nil && old.pending == 0 {
		j.release(old)
	}
	return nil
}

// startFile makes the journal file at path. The file gets its name once it is locked and has
// its header: another process's Open never sees it unlocked (it would take it for a dead
// process's and remove it).
func startFile(path string) (*os.File, error) {
	tmp := path + tmpSuffix
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	if err := lockAndName(f, tmp, path); err != nil {
		f.Close()
		os.Remove(tmp)
		return nil, fmt.Errorf("journal: starting %s: %w", path, err)
	}
	return f, nil
}

// lockAndName locks f, the new file at tmp, writes its header and names it path.
func lockAndName(f *os.File, tmp, path string) error {
	if err := lock(f); err != nil {
		return err
	}
	if _, err := f.Write([]byte(magic)); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// syncDir flushes a directory's entries to stable storage.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// release deletes a file whose appends are all stored. j.mu is held.
func (j *Journal) release(seg *segment) {
	j.segs = slices.DeleteFunc(j.segs, func(s *segment) bool { return s == seg })
	// Remove before closing: the lock is held until the file is gone, so no other process
	// replays it meanwhile.
	if err := os.Remove(seg.path); err != nil {
		j.log.Warn("journal: removing a stored journal file", "file", seg.path, "err", err)
	}
	seg.f.Close()
}

// check applies the rules Append can check without the store (store.CheckMessage's), and gives
// messages ids.
func check(ctx context.Context, rec *record) error {
	if len(rec.Messages) == 0 {
		return fmt.Errorf("no messages to append: %w", store.ErrInvalid)
	}
	if rec.WorkspaceID == "" || rec.ThreadID == "" {
		return fmt.Errorf("a workspace and a thread are required: %w", store.ErrInvalid)
	}
	for i, m := range rec.Messages {
		if err := store.CheckMessage(rec.ThreadID, m); err != nil {
			return fmt.Errorf("message %d: %w", i, err)
		}
		if m.ID == "" {
			m.ID = stamp.ID(ctx, store.PrefixMessage)
		}
	}
	return nil
}

// encode frames rec: length, CRC-32C, JSON.
func encode(rec *record) ([]byte, error) {
	var buf bytes.Buffer
	buf.Write(make([]byte, frameHeader))
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(rec); err != nil {
		return nil, fmt.Errorf("encoding the messages: %v: %w", err, store.ErrInvalid)
	}
	b := buf.Bytes()
	payload := b[frameHeader:]
	if len(payload) > maxPayload {
		return nil, fmt.Errorf("the messages take %d bytes encoded, more than the %d an append may: %w", len(payload), maxPayload, store.ErrInvalid)
	}
	binary.LittleEndian.PutUint32(b[0:4], uint32(len(payload)))
	binary.LittleEndian.PutUint32(b[4:8], crc32.Checksum(payload, crcTable))
	return b, nil
}
