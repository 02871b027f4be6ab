package sessions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/hangar-dev/hangar/gen/host/v1/hostv1connect"
	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/platform/apierr"
	"github.com/hangar-dev/hangar/platform/auth"
)

// Upload headers; each may also come as the query parameter of the same lower-case name
// without the prefix (sha256, mode).
const (
	// SHA256Header is the upload's sha256 (64 lowercase hex digits), checked before the file
	// appears; a download answers with the file's, when it sends the whole file.
	SHA256Header = "X-Hangar-Sha256"
	// ModeHeader is the upload's permission bits in octal (default 0644).
	ModeHeader = "X-Hangar-Mode"
)

// uploadChunk is the size of the WriteFile frames an upload's body is cut into.
const uploadChunk = 256 << 10

// Files serves httpapi.FilesPath. A download reads; an upload acts, so by the dashboard's cookie it
// must come from Hangar's own page with the CSRF header (auth.Act).
func (s *Service) Files(authn *auth.Authenticator) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var serve func(context.Context, http.ResponseWriter, *http.Request, string) error
		var use auth.Use
		switch r.Method {
		case http.MethodPut:
			serve, use = s.upload, auth.Act
		case http.MethodGet, http.MethodHead:
			serve, use = s.download, auth.Read
		default:
			w.Header().Set("Allow", "GET, HEAD, PUT")
			writeErr(w, r, connect.NewError(connect.CodeUnimplemented, fmt.Errorf("%s is not served here: PUT uploads, GET and HEAD download", r.Method)))
			return
		}
		ctx, err := authenticate(authn, r, use)
		if err == nil {
			err = serve(ctx, w, r, "/"+r.PathValue("path"))
		}
		if err != nil {
			writeErr(w, r, err)
		}
	})
}

// upload streams the request body into the sandbox through WriteFile: Content-Length is the
// declared size, the sha256 header (when given) must match, and the file replaces the old one
// only once both are right, so a refused upload leaves nothing behind.
func (s *Service) upload(ctx context.Context, w http.ResponseWriter, r *http.Request, p string) error {
	var v apierr.Violations
	if r.ContentLength < 0 {
		v.Add("Content-Length", "is required: the size is declared up front and checked")
	}
	meta := &appv1.WriteFileMetadata{Path: p, SizeBytes: uint64(max(r.ContentLength, 0)), Sha256: headerOrQuery(r, SHA256Header, "sha256")}
	if raw := headerOrQuery(r, ModeHeader, "mode"); raw != "" {
		mode, err := strconv.ParseUint(raw, 8, 32)
		if err != nil {
			v.Add("mode", "must be octal permission bits, like 0755")
		}
		m := uint32(mode)
		meta.Mode = &m
	}
	if err := v.Err(); err != nil {
		return err
	}
	rec, client, err := s.liveHost(ctx, r.PathValue("id"))
	if err != nil {
		return err
	}
	meta.SessionId = rec.ID
	// The server's unary body deadline is for small bodies; an upload streams for as long as
	// its bytes keep coming.
	_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
	up := client.WriteFile(ctx)
	sendErr := up.Send(&appv1.WriteFileRequest{Frame: &appv1.WriteFileRequest_Metadata{Metadata: meta}})
	buf := make([]byte, uploadChunk)
	for sendErr == nil {
		n, rerr := io.ReadFull(r.Body, buf)
		if n > 0 {
			sendErr = up.Send(&appv1.WriteFileRequest{Frame: &appv1.WriteFileRequest_Chunk{Chunk: buf[:n]}})
		}
		if errors.Is(rerr, io.EOF) || errors.Is(rerr, io.ErrUnexpectedEOF) {
			break
		}
		if rerr != nil {
			// The client broke off: the host aborts the upload when the stream ends short.
			_, _ = up.CloseAndReceive()
			return apierr.InvalidArgument("body", fmt.Sprintf("reading the upload failed: %v", rerr))
		}
	}
	resp, err := up.CloseAndReceive()
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	return json.NewEncoder(w).Encode(map[string]any{
		"path": resp.Msg.GetPath(), "size_bytes": resp.Msg.GetSizeBytes(), "sha256": resp.Msg.GetSha256(),
	})
}

// download streams a file out of the sandbox. A whole file is sent with its Content-Length and
// its sha256 (header and ETag); a Range request is served by http.ServeContent over a reader
// that asks the host for the bytes from each offset it seeks to, so nothing before the range
// is read.
func (s *Service) download(ctx context.Context, w http.ResponseWriter, r *http.Request, p string) error {
	rec, client, err := s.liveHost(ctx, r.PathValue("id"))
	if err != nil {
		return err
	}
	f := &remoteFile{ctx: ctx, client: client, session: rec.ID, path: p}
	ranged := r.Header.Get("Range") != ""
	// A range request first asks for the size alone; ServeContent then seeks to what it sends.
	meta, err := f.open(0, !ranged, ranged)
	if err != nil {
		return err
	}
	defer f.Close()
	h := w.Header()
	h.Set("Content-Type", contentType(p))
	h.Set("Accept-Ranges", "bytes")
	h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": meta.GetFileName()}))
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", appSandboxPolicy)
	if ranged {
		http.ServeContent(w, r, meta.GetFileName(), time.Time{}, f)
		return nil
	}
	h.Set("Content-Length", strconv.FormatUint(meta.GetSizeBytes(), 10))
	h.Set(SHA256Header, meta.GetSha256())
	h.Set("ETag", `"`+meta.GetSha256()+`"`)
	if r.Method == http.MethodHead {
		return nil
	}
	_, _ = io.Copy(w, f) // headers are out: a failure now can only cut the body short
	return nil
}

// contentType is the type a download is served as: by extension, else plain bytes. Content is
// never sniffed, so a file cannot make itself HTML to a browser.
func contentType(p string) string {
	if t := mime.TypeByExtension(strings.ToLower(path.Ext(p))); t != "" && !strings.HasPrefix(t, "text/html") {
		return t
	}
	return "application/octet-stream"
}

func headerOrQuery(r *http.Request, header, param string) string {
	if v := r.Header.Get(header); v != "" {
		return v
	}
	return r.URL.Query().Get(param)
}

// remoteFile reads a sandbox's file through the host's ReadFile, as an io.ReadSeeker: a seek
// drops the stream, and the next read opens one at the new offset.
type remoteFile struct {
	ctx     context.Context
	client  hostv1connect.HostServiceClient
	session string
	path    string

	size   int64
	pos    int64
	stream *connect.ServerStreamForClient[appv1.ReadFileResponse]
	cancel context.CancelFunc
	buf    []byte
}

// open starts a stream from offset and returns its metadata: the whole file, hashed, with
// whole; nothing but the metadata with statOnly.
func (f *remoteFile) open(offset int64, whole, statOnly bool) (*appv1.ReadFileMetadata, error) {
	f.Close()
	ctx, cancel := context.WithCancel(f.ctx)
	req := &appv1.ReadFileRequest{SessionId: f.session, Path: f.path}
	if !whole {
		off := uint64(offset)
		req.Offset = &off
	}
	if statOnly {
		var none uint64
		req.Length = &none
	}
	stream, err := f.client.ReadFile(ctx, connect.NewRequest(req))
	if err != nil {
		cancel()
		return nil, err
	}
	if !stream.Receive() {
		err := stream.Err()
		stream.Close()
		cancel()
		if err == nil {
			err = errors.New("the host sent no metadata")
		}
		return nil, err
	}
	meta := stream.Msg().GetMetadata()
	if meta == nil {
		stream.Close()
		cancel()
		return nil, errors.New("the host sent a chunk before the metadata")
	}
	f.stream, f.cancel, f.size, f.pos, f.buf = stream, cancel, int64(meta.GetSizeBytes()), offset, nil
	if statOnly {
		f.Close()
	}
	return meta, nil
}

func (f *remoteFile) Read(p []byte) (int, error) {
	if f.pos >= f.size {
		return 0, io.EOF
	}
	if f.stream == nil {
		if _, err := f.open(f.pos, false, false); err != nil {
			return 0, err
		}
	}
	for len(f.buf) == 0 {
		if !f.stream.Receive() {
			if err := f.stream.Err(); err != nil {
				return 0, err
			}
			return 0, io.ErrUnexpectedEOF // the file shrank under us
		}
		f.buf = f.stream.Msg().GetChunk()
	}
	n := copy(p, f.buf)
	f.buf = f.buf[n:]
	f.pos += int64(n)
	return n, nil
}

func (f *remoteFile) Seek(offset int64, whence int) (int64, error) {
	var to int64
	switch whence {
	case io.SeekStart:
		to = offset
	case io.SeekCurrent:
		to = f.pos + offset
	case io.SeekEnd:
		to = f.size + offset
	}
	if to < 0 {
		return 0, errors.New("seek before the start of the file")
	}
	if to != f.pos {
		f.Close()
		f.pos = to
	}
	return to, nil
}

// Close ends the current stream, if any.
func (f *remoteFile) Close() error {
	if f.stream != nil {
		f.cancel()
		_ = f.stream.Close()
		f.stream, f.buf = nil, nil
	}
	return nil
}
