package snapshots

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"
	"unicode/utf8"
)

// FormatVersion is the manifest format this package writes and the only one it reads.
const FormatVersion = 1

// EntryType says what kind of file system object an Entry recreates.
type EntryType string

// Entry types. A whiteout is overlayfs's mark for a deleted lower file (char device 0:0); a
// hardlink names an earlier entry of the same manifest that shares its inode.
const (
	TypeDir      EntryType = "dir"
	TypeFile     EntryType = "file"
	TypeSymlink  EntryType = "symlink"
	TypeHardlink EntryType = "hardlink"
	TypeWhiteout EntryType = "whiteout"
	TypeFifo     EntryType = "fifo"
	TypeCharDev  EntryType = "chardev"
	TypeBlockDev EntryType = "blockdev"
)

// Manifest is one snapshot of a session's upper dir: every entry in walk order (parents before
// children) and, for files, the content chunks in the store.
type Manifest struct {
	Format       int       `json:"format"`
	ID           string    `json:"id"`
	SessionID    string    `json:"session_id"`
	SandboxID    string    `json:"sandbox_id,omitempty"`
	CreatedAt    time.Time `json:"created_at"`
	EventsCursor int64     `json:"events_cursor"`
	// ParentID is the manifest this one was taken incrementally from, if any.
	ParentID string `json:"parent_id,omitempty"`
	// Version counts the snapshots of the session: the parent's version plus one, starting at 1.
	Version int64 `json:"version"`
	// TotalSize is the sum of the sizes of the regular files.
	TotalSize int64 `json:"total_size"`
	// ChunkCount is the number of chunk references (a chunk used twice counts twice).
	ChunkCount int      `json:"chunk_count"`
	Chunking   Chunking `json:"chunking"`
	Entries    []Entry  `json:"entries"`
}

// Chunking records the FastCDC sizes the files were cut with; chunks of a later snapshot taken
// with other sizes (or another chunker: see chunkAlgorithm) still restore, they just dedupe less.
type Chunking struct {
	Min int `json:"min"`
	Avg int `json:"avg"`
	Max int `json:"max"`
}

// Entry is one object of the tree. Path is relative and slash-separated; the upper dir itself is
// ".". Ino, Dev and CtimeNs identify the inode the entry was read from, so the next snapshot can
// reuse the chunks of a file that did not change without reading it.
type Entry struct {
	Path RawString `json:"path"`
	Type EntryType `json:"type"`
	// Mode is the permission bits including setuid, setgid and sticky (mode & 07777).
	Mode    uint32 `json:"mode"`
	UID     int    `json:"uid"`
	GID     int    `json:"gid"`
	MtimeNs int64  `json:"mtime_ns"`
	Size    int64  `json:"size,omitempty"`
	// Target is a symlink's target, or for a hardlink the path of the earlier entry it shares.
	Target RawString         `json:"target,omitempty"`
	Rdev   uint64            `json:"rdev,omitempty"`
	Xattrs map[string][]byte `json:"xattrs,omitempty"`
	Chunks []ChunkRef        `json:"chunks,omitempty"`

	Dev     uint64 `json:"dev,omitempty"`
	Ino     uint64 `json:"ino,omitempty"`
	CtimeNs int64  `json:"ctime_ns,omitempty"`
}

// ChunkRef is one content chunk of a file, in file order.
type ChunkRef struct {
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
}

// RawString holds a file name or link target, which on Linux may be any bytes. It encodes as a
// JSON string when it is valid UTF-8 and as {"b64": "..."} otherwise, because encoding/json would
// silently replace invalid bytes and the restored name would differ.
type RawString string

// MarshalJSON implements json.Marshaler.
func (r RawString) MarshalJSON() ([]byte, error) {
	if utf8.ValidString(string(r)) {
		return json.Marshal(string(r))
	}
	return json.Marshal(struct {
		B64 string `json:"b64"`
	}{base64.StdEncoding.EncodeToString([]byte(r))})
}

// UnmarshalJSON implements json.Unmarshaler.
func (r *RawString) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*r = RawString(s)
		return nil
	}
	var o struct {
		B64 string `json:"b64"`
	}
	if err := json.Unmarshal(b, &o); err != nil {
		return fmt.Errorf("raw string: %w", err)
	}
	raw, err := base64.StdEncoding.DecodeString(o.B64)
	if err != nil {
		return fmt.Errorf("raw string: %w", err)
	}
	*r = RawString(raw)
	return nil
}

// Summary describes a stored manifest without its entries.
type Summary struct {
	ID           string    `json:"id"`
	SessionID    string    `json:"session_id"`
	SandboxID    string    `json:"sandbox_id,omitempty"`
	ParentID     string    `json:"parent_id,omitempty"`
	Version      int64     `json:"version"`
	CreatedAt    time.Time `json:"created_at"`
	EventsCursor int64     `json:"events_cursor"`
	TotalSize    int64     `json:"total_size"`
	ChunkCount   int       `json:"chunk_count"`
	Entries      int       `json:"entries"`
}

// Summary returns m without its entries.
func (m *Manifest) Summary() Summary {
	return Summary{
		ID: m.ID, SessionID: m.SessionID, SandboxID: m.SandboxID, ParentID: m.ParentID,
		Version: m.Version, CreatedAt: m.CreatedAt, EventsCursor: m.EventsCursor,
		TotalSize: m.TotalSize, ChunkCount: m.ChunkCount, Entries: len(m.Entries),
	}
}

// ErrInvalidManifest is wrapped by every error about a manifest's content.
var ErrInvalidManifest = errors.New("invalid manifest")

func decodeManifest(b []byte) (*Manifest, error) {
	var head struct {
		Format int `json:"format"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidManifest, err)
	}
	if head.Format != FormatVersion {
		return nil, fmt.Errorf("%w: format %d, this host reads format %d", ErrInvalidManifest, head.Format, FormatVersion)
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidManifest, err)
	}
	return &m, nil
}

// validate checks everything Restore relies on, so a manifest from storage — data, not code —
// can only ever create entries beneath the restore dir: paths are clean and relative, every
// parent is a directory created earlier by the same manifest (so no path walks through a
// symlink), each path appears once, hardlinks point back at earlier non-directory entries and
// chunk lists add up to the file size.
func (m *Manifest) validate() error {
	if m.Format != FormatVersion {
		return fmt.Errorf("%w: format %d", ErrInvalidManifest, m.Format)
	}
	if len(m.Entries) == 0 || m.Entries[0].Path != "." || m.Entries[0].Type != TypeDir {
		return fmt.Errorf("%w: first entry must be the root directory \".\"", ErrInvalidManifest)
	}
	seen := make(map[RawString]EntryType, len(m.Entries))
	for i := range m.Entries {
		e := &m.Entries[i]
		if err := e.validate(i == 0, seen); err != nil {
			return fmt.Errorf("%w: entry %d %q: %v", ErrInvalidManifest, i, e.Path, err)
		}
		seen[e.Path] = e.Type
	}
	return nil
}

func (e *Entry) validate(root bool, seen map[RawString]EntryType) error {
	p := string(e.Path)
	if !root {
		if p == "" || p == "." || strings.HasPrefix(p, "/") || strings.ContainsRune(p, 0) || path.Clean(p) != p ||
			p == ".." || strings.HasPrefix(p, "../") {
			return errors.New("path must be clean, relative and beneath the root")
		}
		if _, dup := seen[e.Path]; dup {
			return errors.New("duplicate path")
		}
		if seen[RawString(path.Dir(p))] != TypeDir {
			return errors.New("parent is not a directory of this manifest")
		}
	}
	if e.Mode&^0o7777 != 0 {
		return fmt.Errorf("mode %o has bits beyond 07777", e.Mode)
	}
	switch e.Type {
	case TypeDir, TypeWhiteout, TypeFifo, TypeCharDev, TypeBlockDev:
	case TypeSymlink:
		if e.Target == "" || strings.ContainsRune(string(e.Target), 0) {
			return errors.New("symlink needs a target without NUL")
		}
	case TypeHardlink:
		switch seen[e.Target] {
		case TypeFile, TypeSymlink, TypeFifo, TypeCharDev, TypeBlockDev:
		default:
			return fmt.Errorf("hardlink target %q is not an earlier linkable entry", e.Target)
		}
	case TypeFile:
		var sum int64
		for _, c := range e.Chunks {
			if b, err := hex.DecodeString(c.SHA256); err != nil || len(b) != 32 {
				return fmt.Errorf("chunk %q is not a sha256", c.SHA256)
			}
			if c.Size <= 0 {
				return fmt.Errorf("chunk %s has size %d", c.SHA256, c.Size)
			}
			sum += c.Size
		}
		if sum != e.Size {
			return fmt.Errorf("chunks add up to %d bytes, size is %d", sum, e.Size)
		}
	default:
		return fmt.Errorf("unknown type %q", e.Type)
	}
	return nil
}
