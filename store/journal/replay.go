package journal

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/quiverhq/quiver/store"
)

// replay stores the appends of the files in the directory that no live process holds, oldest
// file first, and deletes each file once stored.
func (j *Journal) replay(ctx context.Context) error {
	names, err := filepath.Glob(filepath.Join(j.dir, "*"+fileSuffix))
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	slices.Sort(names)
	for _, path := range names {
		if err := j.replayFile(ctx, path); err != nil {
			return err
		}
	}
	// Files a process was starting when it died hold no appends (a file is named *.journal
	// before its first append): remove those no live process holds.
	starting, _ := filepath.Glob(filepath.Join(j.dir, "*"+fileSuffix+tmpSuffix))
	for _, path := range starting {
		f, err := os.Open(path)
		if err != nil {
			continue
		}
		if lock(f) == nil {
			os.Remove(path)
		}
		f.Close()
	}
	return nil
}

func (j *Journal) replayFile(ctx context.Context, path string) error {
	f, err := openUnheld(path)
	if f == nil || err != nil {
		return err
	}
	defer f.Close()
	ops, undecodable, rest, err := readFile(f)
	if err != nil {
		return fmt.Errorf("journal: reading %s: %w", path, err)
	}
	j.logRead(path, len(ops), undecodable, rest)
	for len(ops) > 0 {
		n := min(len(ops), j.opts.MaxBatch)
		if _, err := j.storeOps(ctx, ops[:n], true); err != nil {
			return fmt.Errorf("journal: storing the appends of %s: %w", path, err)
		}
		ops = ops[n:]
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("journal: storing the appends of %s: %w", path, err)
		}
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	return nil
}

// openUnheld opens and locks the journal file at path; nil, without an error, when it is gone
// or a live process holds it.
func openUnheld(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil // its process removed it meanwhile
	}
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	if locked, err := lockUnheld(f, path); !locked || err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// lockUnheld locks f, the file at path; false when a live process holds it, or it was removed
// meanwhile.
func lockUnheld(f *os.File, path string) (bool, error) {
	if err := lock(f); errors.Is(err, errLocked) {
		return false, nil // a live process writes it
	} else if err != nil {
		return false, fmt.Errorf("journal: locking %s: %w", path, err)
	}
	_, err := os.Stat(path)
	return !errors.Is(err, os.ErrNotExist), nil // removed between our open and our lock: it was stored
}

// logRead says what reading a file left behind found beside its appends.
func (j *Journal) logRead(path string, ops, undecodable int, rest int64) {
	if undecodable > 0 {
		j.log.Error("journal: records of a journal file do not decode; skipped", "file", path, "records", undecodable)
	}
	if rest > 0 {
		j.log.Warn("journal: the end of a journal file is damaged or cut short; discarded", "file", path, "bytes", rest)
	}
	if ops > 0 {
		j.log.Info("journal: storing appends left by a stopped process", "file", path, "appends", ops)
	}
}

// readFile reads the appends of a journal file, up to the first frame that is cut short or
// damaged, and returns how many whole frames did not decode and how many bytes follow the last
// whole frame.
func readFile(f *os.File) (ops []store.AppendOp, undecodable int, rest int64, err error) {
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, 0, 0, err
	}
	if len(b) < len(magic) {
		return nil, 0, int64(len(b)), nil
	}
	if string(b[:len(magic)]) != magic {
		return nil, 0, 0, fmt.Errorf("not a journal file (it starts with %q)", strings.ToValidUTF8(string(b[:len(magic)]), "?"))
	}
	b = b[len(magic):]
	for {
		payload, after, ok := nextFrame(b)
		if !ok {
			return ops, undecodable, int64(len(b)), nil
		}
		b = after
		op, err := decode(payload)
		if err != nil {
			// Framed and checksummed, so written whole: a record this version cannot read
			// (a bug), not damage. Skip it, keep the rest.
			undecodable++
			continue
		}
		ops = append(ops, op)
	}
}

// nextFrame is the payload of the frame at the start of b, and what follows it; false when b
// does not start with a whole frame.
func nextFrame(b []byte) (payload, after []byte, ok bool) {
	if len(b) < frameHeader {
		return nil, b, false
	}
	n := binary.LittleEndian.Uint32(b[0:4])
	// An empty payload is never written (and its checksum is 0, like zeros on disk).
	if n == 0 || n > maxPayload || int64(n) > int64(len(b)-frameHeader) {
		return nil, b, false
	}
	payload = b[frameHeader : frameHeader+int(n)]
	if crc32.Checksum(payload, crcTable) != binary.LittleEndian.Uint32(b[4:8]) {
		return nil, b, false
	}
	return payload, b[frameHeader+int(n):], true
}

func decode(payload []byte) (store.AppendOp, error) {
	var rec record
	if err := json.Unmarshal(payload, &rec); err != nil {
		return store.AppendOp{}, err
	}
	for _, m := range rec.Messages {
		if m == nil {
			return store.AppendOp{}, errors.New("a message is null")
		}
		// What the store sets is set again when it stores the message.
		m.Seq, m.CreatedAt = 0, time.Time{}
	}
	return store.AppendOp{WorkspaceID: rec.WorkspaceID, ThreadID: rec.ThreadID, Messages: rec.Messages, At: rec.At}, nil
}
