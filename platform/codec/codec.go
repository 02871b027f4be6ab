// Package codec is the API's JSON wire format: the proto's field names (snake_case) in both
// directions, scalars and lists always present, and unknown fields refused so that a
// hand-written client with a misspelt field hears about it instead of losing data.
package codec

import (
	"fmt"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// JSON returns the handler options that install the codec under both names Connect uses for
// JSON ("json" and "json; charset=utf-8").
func JSON() connect.Option {
	return connect.WithOptions(
		connect.WithCodec(jsonCodec{name: "json"}),
		connect.WithCodec(jsonCodec{name: "json; charset=utf-8"}),
	)
}

var (
	marshal   = protojson.MarshalOptions{UseProtoNames: true, EmitDefaultValues: true}
	unmarshal = protojson.UnmarshalOptions{}
)

type jsonCodec struct{ name string }

func (c jsonCodec) Name() string { return c.name }

func (c jsonCodec) Marshal(v any) ([]byte, error) {
	m, ok := v.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("marshal %T: not a protobuf message", v)
	}
	return marshal.Marshal(m)
}

func (c jsonCodec) Unmarshal(data []byte, v any) error {
	m, ok := v.(proto.Message)
	if !ok {
		return fmt.Errorf("unmarshal into %T: not a protobuf message", v)
	}
	if len(data) == 0 {
		// An empty body is the empty message, as curl users expect of `-d ''`.
		proto.Reset(m)
		return nil
	}
	return unmarshal.Unmarshal(data, m)
}
