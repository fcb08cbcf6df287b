package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"mime"
	"path"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/quiverhq/quiver/internal/stamp"
)

// Errors of the thread file system, besides ErrNotFound and ErrInvalid.
var (
	// ErrTooLarge: a write would take a file or a thread's file system over a size cap
	// (FileLimits). Nothing was written; the message says which cap and what it is.
	ErrTooLarge = errors.New("store: too large")
	// ErrExists: something already exists where a new entry was asked for (Mkdir).
	ErrExists = errors.New("store: already exists")
)

// PrefixFile is the id prefix of files and directories.
const PrefixFile = "fil"

// AttachmentsDir is the directory of a thread's file system where new attachments land.
const AttachmentsDir = "/attachments"

// FileInfo describes a file or a directory of a thread's file system.
type FileInfo struct {
	// ID identifies this version of the entry (fil_...): a file gets a new one each time it
	// is written, so a reference (ID and Path) tells whether the file changed since. The root
	// directory has none.
	ID string `json:"id,omitempty"`
	// Path is the absolute path in the thread's file system, like "/attachments/x.png".
	Path string `json:"path"`
	// Name is the last segment of Path ("/" for the root).
	Name string `json:"name"`
	// OriginalName is the name the file came with when the store named its path: an
	// attachment's name as the tool gave it ("chart.png", stored at
	// /attachments/20250102T150405.123Z-….png, so that paths never collide), kept by its copies,
	// and a copied file's own name. Empty for a file written at a path of its writer's choosing
	// (WriteFile), or an attachment given no name. DisplayName is the name to show.
	OriginalName string `json:"original_name,omitempty"`
	IsDir        bool   `json:"is_dir,omitempty"`
	// Size is the length of a file's content in bytes; 0 for a directory.
	Size     int64  `json:"size"`
	MimeType string `json:"mime_type,omitempty"`
	// Width and Height are an image's dimensions in pixels when known, else 0.
	Width       int    `json:"width,omitempty"`
	Height      int    `json:"height,omitempty"`
	Description string `json:"description,omitempty"`
	// ModTime is when a file's content was last written, or when a directory was created.
	ModTime time.Time `json:"mod_time"`
}

// DisplayName is the name to show for the file: its OriginalName when it has one, else Name.
func (fi *FileInfo) DisplayName() string {
	if fi.OriginalName != "" {
		return fi.OriginalName
	}
	return fi.Name
}

// FileMeta is what a writer may say about a file besides its content. WriteFile stores it as
// given, replacing the previous file's.
type FileMeta struct {
	// MimeType is the content's MIME type, like "image/png"; empty: guessed from the file's
	// extension and content (GuessMimeType).
	MimeType string
	// Width and Height are an image's dimensions in pixels, 0 when unknown.
	Width, Height int
	// Description is a short text about the file (at most MaxDescriptionBytes).
	Description string
	// OriginalName is the name the file came with (FileInfo.OriginalName): a file name of
	// valid UTF-8 without / \ or NUL, at most MaxNameBytes. AddAttachment and CopyFiles set
	// it; a writer may leave it empty.
	OriginalName string
}

// MaxDescriptionBytes caps FileMeta.Description.
const MaxDescriptionBytes = 4096

// NewAttachment is a file a tool result brings with its data, for AddAttachment.
type NewAttachment struct {
	// Name is the file name the tool gave, like "chart.png". The stored file's path gets a
	// name of its own, with Name's extension (see AddAttachment); Name is kept as its
	// FileInfo.OriginalName (its last segment, when it has / or \ in it). It may be empty.
	Name string
	// MimeType is the content's MIME type; empty: guessed from Name and the content.
	MimeType string
	// Data is the content, decoded.
	Data []byte
	// Width, Height (pixels, 0 when unknown) and Description are stored with the file.
	Width, Height int
	Description   string
}

// GrepMatch is one line Grep found.
type GrepMatch struct {
	Path string `json:"path"`
	// Line is the line number, from 1.
	Line int `json:"line"`
	// Text is the line without its end of line, at most MaxGrepLineBytes bytes (cut at a
	// character boundary), invalid UTF-8 replaced by U+FFFD.
	Text string `json:"text"`
}

// MaxGrepLineBytes caps GrepMatch.Text.
const MaxGrepLineBytes = 500

// FileLimits are the caps of a thread file system. A zero field takes its default (see
// DefaultFileLimits).
type FileLimits struct {
	// MaxFileBytes caps the size of one file (default 32 MiB).
	MaxFileBytes int64
	// MaxThreadBytes caps the total size of a thread's files (default 1 GiB).
	MaxThreadBytes int64
	// MaxThreadEntries caps how many files and directories a thread holds (default 100,000).
	MaxThreadEntries int64
	// MaxGrepMatches caps the lines one Grep returns (default 1000).
	MaxGrepMatches int
	// MaxGrepBytes caps how much file content one Grep reads (default 64 MiB).
	MaxGrepBytes int64
	// MaxFindResults caps the paths one Find returns (default 1000).
	MaxFindResults int
}

// DefaultFileLimits returns the default caps.
func DefaultFileLimits() FileLimits {
	return FileLimits{
		MaxFileBytes:     32 << 20,
		MaxThreadBytes:   1 << 30,
		MaxThreadEntries: 100_000,
		MaxGrepMatches:   1000,
		MaxGrepBytes:     64 << 20,
		MaxFindResults:   1000,
	}
}

// WithDefaults returns l with every field that is zero or negative set to its default.
func (l FileLimits) WithDefaults() FileLimits {
	d := DefaultFileLimits()
	if l.MaxFileBytes <= 0 {
		l.MaxFileBytes = d.MaxFileBytes
	}
	if l.MaxThreadBytes <= 0 {
		l.MaxThreadBytes = d.MaxThreadBytes
	}
	if l.MaxThreadEntries <= 0 {
		l.MaxThreadEntries = d.MaxThreadEntries
	}
	if l.MaxGrepMatches <= 0 {
		l.MaxGrepMatches = d.MaxGrepMatches
	}
	if l.MaxGrepBytes <= 0 {
		l.MaxGrepBytes = d.MaxGrepBytes
	}
	if l.MaxFindResults <= 0 {
		l.MaxFindResults = d.MaxFindResults
	}
	return l
}

// CheckFileSize returns an ErrTooLarge error when a file of size bytes at path is over
// MaxFileBytes, else nil.
func (l FileLimits) CheckFileSize(path string, size int64) error {
	if size > l.MaxFileBytes {
		return fmt.Errorf("store: %s would be %s, over the limit of %s for one file: %w",
			path, formatBytes(size), formatBytes(l.MaxFileBytes), ErrTooLarge)
	}
	return nil
}

// CheckUsage returns an ErrTooLarge error when a thread's file system holding bytes bytes in
// entries files and directories (after a write) would be over MaxThreadBytes or
// MaxThreadEntries, else nil. A write that frees space or entries is always allowed, so that a
// thread over caps lowered since can be cleaned up: pass the change as well (addBytes,
// addEntries) and only growth is checked.
func (l FileLimits) CheckUsage(threadID string, bytes, entries, addBytes, addEntries int64) error {
	if addBytes > 0 && bytes > l.MaxThreadBytes {
		return fmt.Errorf("store: thread %s: its files would take %s, over the limit of %s for a thread's files; remove some first: %w",
			threadID, formatBytes(bytes), formatBytes(l.MaxThreadBytes), ErrTooLarge)
	}
	if addEntries > 0 && entries > l.MaxThreadEntries {
		return fmt.Errorf("store: thread %s: its file system would hold %d files and directories, over the limit of %d; remove some first: %w",
			threadID, entries, l.MaxThreadEntries, ErrTooLarge)
	}
	return nil
}

// formatBytes writes n as bytes and, when at least 1 KiB, in binary units: "33554432 bytes
// (32 MiB)".
func formatBytes(n int64) string {
	units := []string{"KiB", "MiB", "GiB", "TiB"}
	if n < 1024 {
		return fmt.Sprintf("%d bytes", n)
	}
	v, u := float64(n)/1024, 0
	for v >= 1024 && u < len(units)-1 {
		v, u = v/1024, u+1
	}
	s := fmt.Sprintf("%.1f", v)
	s = strings.TrimSuffix(s, ".0")
	return fmt.Sprintf("%d bytes (%s %s)", n, s, units[u])
}

// Files is a thread's file system, stored in the database: several nodes sharing
// it see the same files. Every method names the workspace and the thread; a thread that does
// not exist, or belongs to another workspace, is ErrNotFound, and nothing of it is read or
// changed. Paths are checked by CheckPath (ErrInvalid, as a *PathError, when they break a
// rule). Every change is one transaction: it happens entirely or not at all.
//
// The root directory "/" of every thread always exists. Sizes are capped (FileLimits): a write
// over a cap fails with ErrTooLarge and leaves everything as it was.
type Files interface {
	// WriteFile creates the file at path, or replaces the file there, with data and meta, in
	// one step: a reader sees the old content or the new, never a mix, and the last of several
	// concurrent writers wins. Missing parent directories are created (like mkdir -p). It
	// fails with ErrInvalid when path is "/" or a directory, or when a parent is a file (not
	// a directory), and with ErrTooLarge over a size cap.
	WriteFile(ctx context.Context, workspaceID, threadID, path string, data []byte, meta FileMeta) (*FileInfo, error)
	// ReadFile returns the content of the file at path and its description; ErrNotFound when
	// there is none, ErrInvalid when path is a directory.
	ReadFile(ctx context.Context, workspaceID, threadID, path string) ([]byte, *FileInfo, error)
	// Stat describes the file or directory at path (ErrNotFound when there is none). The root
	// "/" is a directory without ID.
	Stat(ctx context.Context, workspaceID, threadID, path string) (*FileInfo, error)
	// ReadDir lists the entries directly inside the directory at path, sorted by name (byte
	// order); ErrNotFound when there is no such directory, ErrInvalid when path is a file.
	ReadDir(ctx context.Context, workspaceID, threadID, path string) ([]*FileInfo, error)
	// Remove deletes the file at path (ErrNotFound when there is none; ErrInvalid for a
	// directory: use Rmdir).
	Remove(ctx context.Context, workspaceID, threadID, path string) error
	// Mkdir creates the directory at path and any missing parent, like os.MkdirAll except
	// that ErrExists is returned when the path itself already exists (a file or a directory:
	// callers that want "mkdir -p" ignore ErrExists after checking with Stat). ErrInvalid when
	// a parent is a file or path is "/".
	Mkdir(ctx context.Context, workspaceID, threadID, path string) (*FileInfo, error)
	// Rmdir deletes the empty directory at path: ErrNotFound when there is none, ErrInvalid
	// when it is not empty, is a file, or is the root.
	Rmdir(ctx context.Context, workspaceID, threadID, path string) error
	// Grep returns the lines matching pattern (Go regexp syntax, RE2: linear time) in the
	// files at or under root (a directory, or a single file), in path order then line order.
	// Files that look binary (a NUL byte in their first 8000 bytes) are skipped. The work is
	// bounded: at most FileLimits.MaxGrepMatches lines are returned and at most
	// MaxGrepBytes of content is read; truncated reports that the search stopped at a bound
	// before the end. A bad pattern is ErrInvalid; a missing root ErrNotFound.
	Grep(ctx context.Context, workspaceID, threadID, root, pattern string) (matches []GrepMatch, truncated bool, err error)
	// Find returns the paths under root (a directory; root itself excluded) of the files and
	// directories matching pattern, in byte order. The pattern is a glob (path.Match syntax,
	// plus "**" for any number of segments): without "/" it is matched against each entry's
	// name (like find -name), starting with "/" against the whole path, otherwise against the
	// path relative to root. The empty pattern matches everything. At most
	// FileLimits.MaxFindResults paths are returned; truncated reports there were more.
	Find(ctx context.Context, workspaceID, threadID, root, pattern string) (paths []string, truncated bool, err error)
	// AddAttachment stores a new attachment at a fresh path
	// /attachments/<time>-<random>.<ext>, where <time> is the UTC time like
	// 20250102T150405.123Z and <ext> comes from the attachment's name, else its MIME type,
	// else is "bin" (see AttachmentPath). The file never replaces another one. The name the
	// attachment was given is kept as the file's OriginalName.
	AddAttachment(ctx context.Context, workspaceID, threadID string, a NewAttachment) (*FileInfo, error)
	// CopyFiles copies the files at paths in thread from into thread to, both of the workspace
	// (a result crossing threads brings its attachments along), each to a fresh
	// attachment path in the receiving thread's /attachments/ (named as AddAttachment names
	// them from the source's name and MIME type, so copies never collide with anything), each
	// keeping the source's DisplayName as its OriginalName.
	// It returns the copies in the order of paths; a path given twice is copied once and
	// both get the same copy. All files are copied or none: ErrNotFound when a source is
	// missing, ErrInvalid when it is a directory, ErrTooLarge when the receiving thread has
	// no room.
	CopyFiles(ctx context.Context, workspaceID, fromThreadID string, paths []string, toThreadID string) ([]*FileInfo, error)
}

// CheckFileMeta checks what a writer says about a file: a MIME type that parses (printable
// ASCII, at most 255 bytes), no negative dimension, a description of valid UTF-8 without NUL of at most
// MaxDescriptionBytes. The errors wrap ErrInvalid.
func CheckFileMeta(m FileMeta) error {
	if m.MimeType != "" {
		if len(m.MimeType) > 255 {
			return fmt.Errorf("store: MIME type of %d bytes, over the 255 byte limit: %w", len(m.MimeType), ErrInvalid)
		}
		ascii := true
		for _, c := range []byte(m.MimeType) {
			ascii = ascii && c >= 0x20 && c < 0x7f
		}
		if _, _, err := mime.ParseMediaType(m.MimeType); err != nil || !ascii {
			return fmt.Errorf("store: %q is not a MIME type (like image/png): %w", m.MimeType, ErrInvalid)
		}
	}
	if m.Width < 0 || m.Height < 0 || m.Width > 1<<30 || m.Height > 1<<30 {
		return fmt.Errorf("store: image dimensions %dx%d out of range: %w", m.Width, m.Height, ErrInvalid)
	}
	if err := checkOriginalName(m.OriginalName); err != nil {
		return err
	}
	switch {
	case len(m.Description) > MaxDescriptionBytes:
		return fmt.Errorf("store: description of %d bytes, over the %d byte limit: %w", len(m.Description), MaxDescriptionBytes, ErrInvalid)
	case !utf8.ValidString(m.Description) || strings.IndexByte(m.Description, 0) >= 0:
		return fmt.Errorf("store: the description must be valid UTF-8 without NUL: %w", ErrInvalid)
	}
	return nil
}

// checkOriginalName checks a file's original name: empty, or a file name of valid UTF-8
// without / \ or NUL of at most MaxNameBytes.
func checkOriginalName(name string) error {
	if name == "" {
		return nil
	}
	if !utf8.ValidString(name) || len(name) > MaxNameBytes || strings.ContainsAny(name, "/\\\x00") {
		return fmt.Errorf("store: original name %q: want a file name of valid UTF-8 without / \\ or NUL, of at most %d bytes: %w",
			strings.ToValidUTF8(name[:min(len(name), 80)], "?"), MaxNameBytes, ErrInvalid)
	}
	return nil
}

// originalName is the name an attachment called name keeps: its last segment, when name has
// / or \ in it; "" for none, or for "." or "..".
func originalName(name string) string {
	if i := strings.LastIndexAny(name, "/\\"); i >= 0 {
		name = name[i+1:]
	}
	name = strings.ReplaceAll(name, "\x00", "")
	if name == "." || name == ".." {
		return ""
	}
	return name
}

// PrepareWrite checks a write of data with meta at p and returns the meta to store, with the
// MIME type guessed when empty: what WriteFile does before touching the database. The errors
// wrap ErrInvalid or ErrTooLarge.
func PrepareWrite(l FileLimits, p string, data []byte, meta FileMeta) (FileMeta, error) {
	if err := CheckPath(p); err != nil {
		return meta, err
	}
	if p == "/" {
		return meta, &PathError{Path: p, Rule: "is the root directory, not a file"}
	}
	if err := CheckFileMeta(meta); err != nil {
		return meta, err
	}
	if err := l.CheckFileSize(p, int64(len(data))); err != nil {
		return meta, err
	}
	if meta.MimeType == "" {
		meta.MimeType = GuessMimeType(BaseName(p), data)
	}
	return meta, nil
}

// extTypes are the MIME types GuessMimeType knows by extension. The table is fixed, not the
// host's, so that every node guesses alike.
var extTypes = map[string]string{
	".avif": "image/avif", ".bmp": "image/bmp", ".gif": "image/gif", ".heic": "image/heic", ".ico": "image/x-icon",
	".jpeg": "image/jpeg", ".jpg": "image/jpeg", ".png": "image/png", ".svg": "image/svg+xml", ".tif": "image/tiff",
	".tiff": "image/tiff", ".webp": "image/webp",
	".flac": "audio/flac", ".m4a": "audio/mp4", ".mp3": "audio/mpeg", ".oga": "audio/ogg", ".ogg": "audio/ogg",
	".opus": "audio/opus", ".wav": "audio/wav",
	".mov": "video/quicktime", ".mp4": "video/mp4", ".webm": "video/webm",
	".csv": "text/csv; charset=utf-8", ".css": "text/css; charset=utf-8", ".htm": "text/html; charset=utf-8",
	".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8", ".md": "text/markdown; charset=utf-8",
	".mjs": "text/javascript; charset=utf-8", ".tsv": "text/tab-separated-values; charset=utf-8",
	".txt":  "text/plain; charset=utf-8",
	".json": "application/json", ".pdf": "application/pdf", ".wasm": "application/wasm", ".xml": "application/xml",
	".yaml": "application/yaml", ".yml": "application/yaml", ".zip": "application/zip", ".gz": "application/gzip",
	".tar": "application/x-tar", ".bin": "application/octet-stream",
}

// typeExts are the extensions AttachmentPath gives by MIME type.
var typeExts = map[string]string{
	"image/avif": "avif", "image/bmp": "bmp", "image/gif": "gif", "image/heic": "heic", "image/x-icon": "ico",
	"image/jpeg": "jpg", "image/png": "png", "image/svg+xml": "svg", "image/tiff": "tiff", "image/webp": "webp",
	"audio/flac": "flac", "audio/mp4": "m4a", "audio/mpeg": "mp3", "audio/ogg": "ogg", "audio/opus": "opus",
	"audio/wav": "wav", "audio/x-wav": "wav", "audio/wave": "wav",
	"video/quicktime": "mov", "video/mp4": "mp4", "video/webm": "webm",
	"text/csv": "csv", "text/css": "css", "text/html": "html", "text/javascript": "js", "text/markdown": "md",
	"text/tab-separated-values": "tsv", "text/plain": "txt", "text/xml": "xml",
	"application/json": "json", "application/pdf": "pdf", "application/wasm": "wasm", "application/xml": "xml",
	"application/yaml": "yaml", "application/zip": "zip", "application/gzip": "gz", "application/x-tar": "tar",
	"application/javascript": "js", "application/octet-stream": "bin",
}

// GuessMimeType returns a MIME type for a file called name holding data: the type of its
// extension when known (a fixed table: images, audio, video, common text and document
// formats), else "text/plain; charset=utf-8" for valid UTF-8 without NUL, else
// "application/octet-stream".
func GuessMimeType(name string, data []byte) string {
	if t, ok := extTypes[strings.ToLower(path.Ext(name))]; ok {
		return t
	}
	if utf8.Valid(data) && bytes.IndexByte(data, 0) < 0 {
		return "text/plain; charset=utf-8"
	}
	return "application/octet-stream"
}

// attachmentExt is the extension (without dot) of an attachment called name of MIME type
// mimeType: name's own when it is 1 to 10 ASCII letters and digits (lowercased), else one
// for the MIME type, else "bin".
func attachmentExt(name, mimeType string) string {
	ext := strings.ToLower(strings.TrimPrefix(path.Ext(name), "."))
	ok := len(ext) >= 1 && len(ext) <= 10
	for _, c := range []byte(ext) {
		ok = ok && (c >= 'a' && c <= 'z' || c >= '0' && c <= '9')
	}
	if ok {
		return ext
	}
	if mt, _, err := mime.ParseMediaType(mimeType); err == nil {
		if e, ok := typeExts[mt]; ok {
			return e
		}
	}
	return "bin"
}

// AttachmentPath returns a fresh path for an attachment called name of MIME type mimeType,
// added at now: /attachments/<time>-<random>.<ext>, with <time> the UTC time to the
// millisecond like 20250102T150405.123Z (names sort by time), <random> 13 characters from 64
// random bits, and <ext> the lowercased extension of name when it is 1 to 10 letters and
// digits, else one for the MIME type (png for image/png...), else bin.
func AttachmentPath(ctx context.Context, name, mimeType string, now time.Time) string {
	return AttachmentsDir + "/" + now.UTC().Format("20060102T150405.000Z") + "-" + stamp.Random(ctx, 8) +
		"." + attachmentExt(name, mimeType)
}

// PrepareAttachment checks a new attachment and returns its path (AttachmentPath) and the
// meta to store (MIME type guessed when empty): what AddAttachment does before touching the
// database. The errors wrap ErrInvalid or ErrTooLarge.
func PrepareAttachment(ctx context.Context, l FileLimits, a NewAttachment, now time.Time) (string, FileMeta, error) {
	meta := FileMeta{MimeType: a.MimeType, Width: a.Width, Height: a.Height, Description: a.Description,
		OriginalName: originalName(a.Name)}
	if !utf8.ValidString(a.Name) || len(a.Name) > MaxNameBytes {
		return "", meta, fmt.Errorf("store: attachment name %q: want valid UTF-8 of at most %d bytes: %w", a.Name, MaxNameBytes, ErrInvalid)
	}
	if err := CheckFileMeta(meta); err != nil {
		return "", meta, err
	}
	if meta.MimeType == "" {
		meta.MimeType = GuessMimeType(a.Name, a.Data)
	}
	p := AttachmentPath(ctx, a.Name, meta.MimeType, now)
	if err := l.CheckFileSize("the attachment "+p, int64(len(a.Data))); err != nil {
		return "", meta, err
	}
	return p, meta, nil
}

// GrepSearch carries one Grep through a backend: the backend lists the candidate files in
// path order, asks Admit before reading each one's content, passes the content to Scan, and
// stops when either says no. Result gives the matches.
type GrepSearch struct {
	re        *regexp.Regexp
	limits    FileLimits
	read      int64
	matches   []GrepMatch
	truncated bool // the search stopped at a bound
	full      bool // ... the match limit: nothing more to scan
}

// MaxGrepPatternBytes caps a Grep pattern.
const MaxGrepPatternBytes = 4096

// NewGrepSearch compiles pattern (Go regexp syntax); a bad pattern is ErrInvalid.
func NewGrepSearch(pattern string, l FileLimits) (*GrepSearch, error) {
	if pattern == "" {
		return nil, fmt.Errorf("store: grep: empty pattern: %w", ErrInvalid)
	}
	if len(pattern) > MaxGrepPatternBytes {
		return nil, fmt.Errorf("store: grep: pattern of %d bytes, over the %d byte limit: %w", len(pattern), MaxGrepPatternBytes, ErrInvalid)
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, fmt.Errorf("store: grep: %v: %w", err, ErrInvalid)
	}
	return &GrepSearch{re: re, limits: l.WithDefaults()}, nil
}

// Admit reports whether the search may read a file of size bytes: false once the search is
// over (the match limit reached) or when the file would take it over MaxGrepBytes, in which
// case the result is marked truncated and the backend stops.
func (g *GrepSearch) Admit(size int64) bool {
	if g.truncated {
		return false
	}
	if g.read+size > g.limits.MaxGrepBytes {
		g.truncated = true
		return false
	}
	g.read += size
	return true
}

// Scan looks for matching lines in the content of the file at p and reports whether the
// search goes on (false once more matches were found than MaxGrepMatches). Files admitted
// before the byte budget ran out are all scanned.
func (g *GrepSearch) Scan(p string, data []byte) bool {
	if g.full {
		return false
	}
	if bytes.IndexByte(data[:min(len(data), 8000)], 0) >= 0 {
		return true // binary
	}
	for n := 1; len(data) > 0; n++ {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		line = bytes.TrimSuffix(line, []byte("\r"))
		if !g.re.Match(line) {
			continue
		}
		if len(g.matches) == g.limits.MaxGrepMatches {
			g.truncated, g.full = true, true
			return false
		}
		g.matches = append(g.matches, GrepMatch{Path: p, Line: n, Text: clipLine(line)})
	}
	return true
}

// Result returns the matches (never nil) and whether the search stopped at a bound.
func (g *GrepSearch) Result() ([]GrepMatch, bool) {
	if g.matches == nil {
		return []GrepMatch{}, g.truncated
	}
	return g.matches, g.truncated
}

// clipLine makes a line valid UTF-8 of at most MaxGrepLineBytes bytes.
func clipLine(line []byte) string {
	if len(line) > MaxGrepLineBytes {
		n := MaxGrepLineBytes
		for i := 0; i < utf8.UTFMax-1 && !utf8.RuneStart(line[n]); i++ {
			n--
		}
		line = line[:n]
	}
	return strings.ToValidUTF8(string(line), "\uFFFD")
}

// FindSearch carries one Find through a backend: the backend passes every path under the root
// (root excluded) in byte order to Add, stopping when it says no; Result gives the paths.
type FindSearch struct {
	root      string
	mode      int // findAll, findName, findAbs, findRel
	segs      []string
	limit     int
	paths     []string
	truncated bool
}

const (
	findAll = iota
	findName
	findAbs
	findRel
)

// NewFindSearch checks pattern (see Files.Find) for a search under root, a path CheckPath
// accepts; a bad pattern is ErrInvalid.
func NewFindSearch(root, pattern string, l FileLimits) (*FindSearch, error) {
	f := &FindSearch{root: root, limit: l.WithDefaults().MaxFindResults}
	if len(pattern) > MaxPathBytes {
		return nil, fmt.Errorf("store: find: pattern of %d bytes, over the %d byte limit: %w", len(pattern), MaxPathBytes, ErrInvalid)
	}
	switch {
	case pattern == "":
		f.mode = findAll
		return f, nil
	case !strings.Contains(pattern, "/"):
		f.mode, f.segs = findName, []string{pattern}
	case strings.HasPrefix(pattern, "/"):
		f.mode, f.segs = findAbs, strings.Split(pattern[1:], "/")
	default:
		f.mode, f.segs = findRel, strings.Split(pattern, "/")
	}
	for _, s := range f.segs {
		if _, err := path.Match(s, ""); err != nil {
			return nil, fmt.Errorf("store: find: pattern %q: %v: %w", pattern, err, ErrInvalid)
		}
	}
	return f, nil
}

// Add offers the path p (under the root) and reports whether the search goes on (false once
// more paths matched than MaxFindResults).
func (f *FindSearch) Add(p string) bool {
	var ok bool
	switch f.mode {
	case findAll:
		ok = true
	case findName:
		ok = matchSegments(f.segs, []string{BaseName(p)})
	case findAbs:
		ok = matchSegments(f.segs, strings.Split(p[1:], "/"))
	case findRel:
		rel := p[len(f.root)+1:] // p is under the root: "/" then the rest, or the root, "/", the rest
		if f.root == "/" {
			rel = p[1:]
		}
		ok = matchSegments(f.segs, strings.Split(rel, "/"))
	}
	if !ok {
		return true
	}
	if len(f.paths) == f.limit {
		f.truncated = true
		return false
	}
	f.paths = append(f.paths, p)
	return true
}

// Result returns the matching paths (never nil) and whether there were more than the limit.
func (f *FindSearch) Result() ([]string, bool) {
	if f.paths == nil {
		return []string{}, f.truncated
	}
	return f.paths, f.truncated
}

// matchSegments matches path segments against glob segments, "**" standing for any number of
// segments (none included). It runs in time proportional to len(pat)*len(name).
func matchSegments(pat, name []string) bool {
	// m[j]: pat[i:] matches name[j:], computed for i from the end.
	m := make([]bool, len(name)+1)
	m[len(name)] = true
	next := make([]bool, len(name)+1)
	for i := len(pat) - 1; i >= 0; i-- {
		for j := len(name); j >= 0; j-- {
			switch {
			case pat[i] == "**":
				next[j] = m[j] || (j < len(name) && next[j+1])
			case j == len(name):
				next[j] = false
			default:
				ok, _ := path.Match(pat[i], name[j])
				next[j] = ok && m[j+1]
			}
		}
		m, next = next, m
	}
	return m[0]
}
