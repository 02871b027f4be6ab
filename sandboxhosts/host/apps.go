package host

import (
	"context"
	"errors"
	"io"

	"connectrpc.com/connect"

	hostv1 "github.com/hangar-dev/hangar/gen/host/v1"
	"github.com/hangar-dev/hangar/platform/apierr"
	"github.com/hangar-dev/hangar/sandboxhosts/supervisor"
)

// appChunk is the most bytes one DialApp frame carries.
const appChunk = 32 << 10

// DialApp connects to a port on the sandbox's loopback through its supervisor and relays the
// bytes both ways. At most Limits.MaxAppConnsPerSession are open at once per session.
func (h *Host) DialApp(ctx context.Context, stream *connect.BidiStream[hostv1.DialAppInput, hostv1.DialAppOutput]) error {
	first, err := stream.Receive()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return apierr.InvalidArgument("dial", "the stream ended before the frame that names the port")
		}
		return err
	}
	dial := first.GetDial()
	if dial == nil {
		return apierr.InvalidArgument("dial", "the first frame must name the session and port")
	}
	if dial.GetPort() < 1 || dial.GetPort() > 65535 {
		return apierr.InvalidArgument("port", "must be a TCP port, 1 to 65535")
	}
	b, err := h.live(dial.GetSessionId())
	if err != nil {
		return err
	}
	limit := int32(h.opts.Limits.MaxAppConnsPerSession)
	if n := b.appConns.Add(1); n > limit {
		b.appConns.Add(-1)
		return apierr.ResourceExhausted("session %s has %d app connections open, the most allowed at once", b.session, limit)
	}
	defer b.appConns.Add(-1)
	h.touch(ctx, b)
	conn, err := b.sup.DialApp(ctx, int(dial.GetPort()))
	if se, ok := errors.AsType[*supervisor.Error](err); ok && se.Code == supervisor.CodeDialFailed {
		return apierr.FailedPrecondition("%s", se.Message)
	}
	if err != nil {
		return b.diedUnder(err)
	}
	defer conn.Close()
	// An empty frame says the app accepted the connection, before any of its bytes.
	if err := stream.Send(&hostv1.DialAppOutput{}); err != nil {
		return err
	}
	// The client's frames go to the app until it closes its side; the app's bytes go back until
	// the app closes its own, which ends the call: the receiving goroutine then ends with the
	// request, which net/http closes when the handler returns.
	go func() {
		defer conn.CloseWrite()
		for {
			in, err := stream.Receive()
			if err != nil {
				return
			}
			h.touch(ctx, b)
			if _, err := conn.Write(in.GetData()); err != nil {
				return
			}
		}
	}()
	buf := make([]byte, appChunk)
	for {
		n, err := conn.Read(buf)
		if n > 0 {
			if serr := stream.Send(&hostv1.DialAppOutput{Data: buf[:n]}); serr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	return nil
}
