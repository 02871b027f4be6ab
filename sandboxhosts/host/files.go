package host

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"

	"connectrpc.com/connect"
	"golang.org/x/sys/unix"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/platform/apierr"
	"github.com/hangar-dev/hangar/platform/filestream"
	"github.com/hangar-dev/hangar/platform/ids"
	"github.com/hangar-dev/hangar/records/eventlog"
	"github.com/hangar-dev/hangar/records/sessiondb"
	"github.com/hangar-dev/hangar/sandboxhosts/sandboxfs"
)

var sha256Hex = regexp.MustCompile(`^[0-9a-f]{64}$`)

// WriteFile writes a file into the sandbox: the metadata frame first, then chunks. The bytes go
// to a temporary file that replaces the target only once its size and sha256 match.
func (h *Host) WriteFile(ctx context.Context, in *connect.ClientStream[appv1.WriteFileRequest]) (*connect.Response[appv1.WriteFileResponse], error) {
	meta, err := filestream.Metadata(in)
	if err != nil {
		return nil, err
	}
	b, err := h.live(meta.GetSessionId())
	if err != nil {
		return nil, err
	}
	var v apierr.Violations
	if meta.GetSha256() != "" && !sha256Hex.MatchString(meta.GetSha256()) {
		v.Add("sha256", "must be 64 lowercase hex digits")
	}
	mode := os.FileMode(0o644)
	if meta.Mode != nil {
		if meta.GetMode() > 0o7777 {
			v.Add("mode", "must be permission bits, at most 0o7777")
		}
		mode = os.FileMode(meta.GetMode()&0o777) | setBits(meta.GetMode())
	}
	if err := v.Err(); err != nil {
		return nil, err
	}
	if limit := uint64(h.opts.Limits.MaxFileBytes); meta.GetSizeBytes() > limit {
		return nil, apierr.ResourceExhausted("file of %d bytes is larger than the %d-byte limit", meta.GetSizeBytes(), limit)
	}
	h.touch(ctx, b)
	if dir := path.Dir(meta.GetPath()); dir != "/" && strings.HasPrefix(dir, "/") {
		if err := b.root.MkdirAll(dir, 0o755); err != nil {
			return nil, fileErr(meta.GetPath(), err)
		}
	}
	up, err := b.root.Create(meta.GetPath(), mode)
	if err != nil {
		return nil, fileErr(meta.GetPath(), err)
	}
	sum, n, err := receive(in, up, meta.GetSizeBytes())
	if err == nil && n != meta.GetSizeBytes() {
		err = apierr.InvalidArgument("size_bytes", fmt.Sprintf("declared %d bytes, received %d", meta.GetSizeBytes(), n))
	}
	if err == nil && meta.GetSha256() != "" && sum != meta.GetSha256() {
		err = apierr.InvalidArgument("sha256", fmt.Sprintf("declared %s, received bytes hash to %s", meta.GetSha256(), sum))
	}
	if err != nil {
		up.Abort()
		return nil, err
	}
	if err := up.Commit(); err != nil {
		return nil, fileErr(meta.GetPath(), err)
	}
	b.emit(eventlog.KindFileWritten, map[string]any{"path": meta.GetPath(), "size_bytes": n, "sha256": sum, "mode": fmt.Sprintf("%04o", mode.Perm())})
	return connect.NewResponse(&appv1.WriteFileResponse{Path: meta.GetPath(), SizeBytes: n, Sha256: sum}), nil
}

// setBits keeps setuid, setgid and sticky from a Unix mode in Go's encoding.
func setBits(m uint32) os.FileMode {
	var out os.FileMode
	if m&unix.S_ISUID != 0 {
		out |= os.ModeSetuid
	}
	if m&unix.S_ISGID != 0 {
		out |= os.ModeSetgid
	}
	if m&unix.S_ISVTX != 0 {
		out |= os.ModeSticky
	}
	return out
}

// receive copies the chunk frames into w, refusing more than size bytes, and returns their
// sha256 and count.
func receive(in *connect.ClientStream[appv1.WriteFileRequest], w io.Writer, size uint64) (string, uint64, error) {
	hash := sha256.New()
	var n uint64
	for in.Receive() {
		chunk := in.Msg().GetChunk()
		if in.Msg().GetMetadata() != nil {
			return "", n, apierr.InvalidArgument("metadata", "only the first frame may be metadata")
		}
		n += uint64(len(chunk))
		if n > size {
			return "", n, apierr.InvalidArgument("size_bytes", fmt.Sprintf("declared %d bytes, received more", size))
		}
		hash.Write(chunk)
		if _, err := w.Write(chunk); err != nil {
			return "", n, fmt.Errorf("write: %w", err)
		}
	}
	if err := in.Err(); err != nil {
		return "", n, err
	}
	return hex.EncodeToString(hash.Sum(nil)), n, nil
}

// ReadFile streams a regular file of the sandbox: metadata with size and sha256, then chunks.
func (h *Host) ReadFile(ctx context.Context, req *connect.Request[appv1.ReadFileRequest], out *connect.ServerStream[appv1.ReadFileResponse]) error {
	b, err := h.live(req.Msg.GetSessionId())
	if err != nil {
		return err
	}
	h.touch(ctx, b)
	m := req.Msg
	ranged := m.Offset != nil || m.Length != nil
	f, size, sum, err := h.openRegular(b, m.GetPath(), !ranged)
	if err != nil {
		return err
	}
	defer f.Close()
	err = out.Send(&appv1.ReadFileResponse{Frame: &appv1.ReadFileResponse_Metadata{Metadata: &appv1.ReadFileMetadata{
		Path: m.GetPath(), SizeBytes: uint64(size), Sha256: sum, FileName: path.Base(m.GetPath()),
	}}})
	if err != nil {
		return err
	}
	from := int64(min(m.GetOffset(), uint64(size)))
	n := size - from
	if m.Length != nil {
		n = int64(min(m.GetLength(), uint64(n)))
	}
	return filestream.Send(io.NewSectionReader(f, from, n), func(p []byte) error {
		return out.Send(&appv1.ReadFileResponse{Frame: &appv1.ReadFileResponse_Chunk{Chunk: p}})
	})
}

// openRegular opens a regular file of the sandbox within the size cap and, with hash, hashes
// it. The hash and the bytes sent later come from the same open file.
func (h *Host) openRegular(b *box, p string, hash bool) (*os.File, int64, string, error) {
	f, err := b.root.OpenFile(p)
	if err != nil {
		return nil, 0, "", fileErr(p, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, "", fmt.Errorf("stat %s: %w", p, err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, 0, "", apierr.InvalidArgument("path", fmt.Sprintf("%s is a %s, not a regular file", p, kind(fi.Mode())))
	}
	if fi.Size() > h.opts.Limits.MaxFileBytes {
		f.Close()
		return nil, 0, "", apierr.ResourceExhausted("%s holds %d bytes, more than the %d-byte limit", p, fi.Size(), h.opts.Limits.MaxFileBytes)
	}
	if !hash {
		return f, fi.Size(), "", nil
	}
	sum := sha256.New()
	if _, err := io.Copy(sum, io.NewSectionReader(f, 0, fi.Size())); err != nil {
		f.Close()
		return nil, 0, "", fmt.Errorf("read %s: %w", p, err)
	}
	return f, fi.Size(), hex.EncodeToString(sum.Sum(nil)), nil
}

func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "directory"
	case m&fs.ModeNamedPipe != 0:
		return "fifo"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	}
	return "special file"
}

// fileErr maps a sandbox path failure to the caller's error.
func fileErr(p string, err error) error {
	switch {
	case errors.Is(err, sandboxfs.ErrBadPath):
		return apierr.InvalidArgument("path", err.Error())
	case errors.Is(err, sandboxfs.ErrEscape):
		return apierr.PermissionDenied("%s leads outside the sandbox", p)
	case errors.Is(err, fs.ErrNotExist):
		return apierr.NotFound("file", p)
	case errors.Is(err, unix.ENOTDIR), errors.Is(err, unix.EISDIR):
		return apierr.InvalidArgument("path", fmt.Sprintf("%s: %v", p, errors.Unwrap(err)))
	case errors.Is(err, fs.ErrPermission), errors.Is(err, unix.EROFS):
		return apierr.PermissionDenied("%s: %v", p, errors.Unwrap(err))
	case errors.Is(err, unix.ENOSPC), errors.Is(err, unix.EDQUOT):
		return apierr.ResourceExhausted("%s: the sandbox's disk is full", p)
	}
	return fmt.Errorf("%s: %w", p, err)
}

// CreateArtifactFromPath publishes a file of the sandbox: it is copied to the blob store, so it
// outlives the sandbox, with its media type sniffed from name and content.
func (h *Host) CreateArtifactFromPath(ctx context.Context, req *connect.Request[appv1.CreateArtifactFromPathRequest]) (*connect.Response[appv1.CreateArtifactFromPathResponse], error) {
	m := req.Msg
	b, err := h.live(m.GetSessionId())
	if err != nil {
		return nil, err
	}
	if len(m.GetCaption()) > 1000 {
		return nil, apierr.InvalidArgument("caption", "at most 1000 bytes")
	}
	h.touch(ctx, b)
	f, size, sum, err := h.openRegular(b, m.GetPath(), true)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	head := make([]byte, 512)
	n, _ := f.ReadAt(head, 0)
	media := mediaType(m.GetPath(), head[:n])
	id := ids.New("art")
	key := sessiondb.ArtifactKey(b.session, id)
	w, err := h.opts.Bucket.NewWriter(ctx, key, nil)
	if err != nil {
		return nil, fmt.Errorf("store artifact: %w", err)
	}
	if _, err := io.Copy(w, io.NewSectionReader(f, 0, size)); err != nil {
		_ = w.Close()
		_ = h.opts.Bucket.Delete(context.WithoutCancel(ctx), key)
		return nil, fmt.Errorf("store artifact: %w", err)
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("store artifact: %w", err)
	}
	a := sessiondb.Artifact{
		ID: id, Path: m.GetPath(), FileName: path.Base(m.GetPath()), MediaType: media, SizeBytes: size,
		SHA256: sum, Caption: m.GetCaption(), BlobKey: key, CreatedAt: h.clock.Now(),
	}
	if err := h.store.AddArtifact(ctx, b.session, a); err != nil {
		return nil, err
	}
	if !m.GetSuppressEvent() {
		b.emit(eventlog.KindArtifactCreated, map[string]any{
			"artifact_id": id, "path": a.Path, "file_name": a.FileName, "media_type": media,
			"size_bytes": size, "sha256": sum, "caption": a.Caption,
		})
	}
	return connect.NewResponse(&appv1.CreateArtifactFromPathResponse{ArtifactId: id, MediaType: media, SizeBytes: uint64(size)}), nil
}

// mediaType trusts a known extension first (content sniffing cannot tell JSON or CSS from text)
// and the content otherwise.
func mediaType(p string, head []byte) string {
	if t := mime.TypeByExtension(strings.ToLower(filepath.Ext(p))); t != "" {
		return t
	}
	return http.DetectContentType(head)
}
