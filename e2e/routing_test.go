package e2e

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	_ "github.com/hangar-dev/hangar/gen/svc/app/v1"
)

// unbuilt are the services and methods later work builds; until then each must answer
// unimplemented, naming itself, and never a fake success. Every method is built now: a method
// added to proto/ goes here until it does something.
var unbuilt = map[string]bool{}

func allMethods(t *testing.T) []protoreflect.MethodDescriptor {
	t.Helper()
	var out []protoreflect.MethodDescriptor
	protoregistry.GlobalFiles.RangeFilesByPackage("svc.app.v1", func(fd protoreflect.FileDescriptor) bool {
		for i := 0; i < fd.Services().Len(); i++ {
			sd := fd.Services().Get(i)
			for j := 0; j < sd.Methods().Len(); j++ {
				out = append(out, sd.Methods().Get(j))
			}
		}
		return true
	})
	if len(out) < 100 {
		t.Fatalf("found only %d methods in svc.app.v1; is the generated package linked?", len(out))
	}
	return out
}

// connectError is the JSON error body of the Connect protocol.
type connectError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// call posts an empty JSON message to a method the way curl would, using the streaming
// envelope for streaming methods, and returns the HTTP status and the Connect error, if any.
func call(t *testing.T, url, key string, md protoreflect.MethodDescriptor) (int, *connectError) {
	t.Helper()
	path := url + "/rpc/" + string(md.Parent().FullName()) + "/" + string(md.Name())
	streaming := md.IsStreamingClient() || md.IsStreamingServer()
	body, ctype := []byte("{}"), "application/json"
	if streaming {
		var env bytes.Buffer
		env.WriteByte(0)
		_ = binary.Write(&env, binary.BigEndian, uint32(2))
		env.WriteString("{}")
		body, ctype = env.Bytes(), "application/connect+json"
	}
	req, err := http.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", ctype)
	if key != "" {
		req.Header.Set("x-api-key", key)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if !streaming {
		if resp.StatusCode == http.StatusOK {
			return resp.StatusCode, nil
		}
		var ce connectError
		if err := json.Unmarshal(raw, &ce); err != nil {
			t.Fatalf("%s: status %d, body %q is not a Connect error", path, resp.StatusCode, raw)
		}
		return resp.StatusCode, &ce
	}
	if resp.StatusCode != http.StatusOK {
		var ce connectError
		_ = json.Unmarshal(raw, &ce)
		return resp.StatusCode, &ce
	}
	// A stream's error rides in its end-of-stream envelope (flag 0x02).
	for len(raw) >= 5 {
		flags, n := raw[0], binary.BigEndian.Uint32(raw[1:5])
		msg := raw[5 : 5+n]
		raw = raw[5+n:]
		if flags&0x02 != 0 {
			var end struct {
				Error *connectError `json:"error"`
			}
			if err := json.Unmarshal(msg, &end); err != nil {
				t.Fatalf("%s: bad end-of-stream message %q", path, msg)
			}
			return resp.StatusCode, end.Error
		}
	}
	return resp.StatusCode, nil
}

func TestEveryMethodIsRoutedAndUnbuiltOnesSayUnimplemented(t *testing.T) {
	s := newSessionsStack(t)
	for _, md := range allMethods(t) {
		service := string(md.Parent().FullName())
		t.Run(service+"/"+string(md.Name()), func(t *testing.T) {
			status, ce := call(t, s.url, s.admin, md)
			if status == http.StatusNotFound && ce == nil {
				t.Fatalf("not routed (404)")
			}
			if unbuilt[service] || unbuilt[string(md.FullName())] {
				if ce == nil || ce.Code != "unimplemented" {
					t.Fatalf("want unimplemented, got status %d error %+v", status, ce)
				}
				if !strings.Contains(ce.Message, string(md.FullName())) {
					t.Fatalf("unimplemented message %q does not name the method", ce.Message)
				}
				return
			}
			if ce != nil && (ce.Code == "unimplemented" || ce.Code == "internal" || ce.Code == "unknown") {
				t.Fatalf("built method answered %+v to an empty request; want success or a clear error", ce)
			}
		})
	}
}
