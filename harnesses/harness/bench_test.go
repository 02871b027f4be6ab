package harness_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"testing"

	"github.com/hangar-dev/hangar/harnesses/abi"
	"github.com/hangar-dev/hangar/harnesses/harness"
	"github.com/hangar-dev/hangar/harnesses/harness/testdata/echo"
	"github.com/hangar-dev/hangar/runtimes/wasm"
)

// The output the parse benchmarks feed: one line, and 1 MiB of 80-byte lines in 64 KiB chunks
// (which split lines, so the state is exercised).
const (
	eventLine = "one line of output from the harness\n"
	chunkSize = 64 << 10
)

var mebibyte = lines(1<<20/80+1, 80)[:1<<20]

func BenchmarkParsePerEvent(b *testing.B) {
	p := load(b, newRuntime(b, wasm.Options{}), "good")
	ctx := context.Background()
	req := abi.ParseRequest{Stream: "stdout", Chunk: eventLine}
	for b.Loop() {
		if res, err := p.Parse(ctx, req); err != nil || len(res.Events) != 1 {
			b.Fatal(res, err)
		}
	}
}

func BenchmarkParseMiB(b *testing.B) {
	p := load(b, newRuntime(b, wasm.Options{}), "good")
	ctx := context.Background()
	b.SetBytes(int64(len(mebibyte)))
	for b.Loop() {
		parseAll(b, func(req abi.ParseRequest) (abi.ParseResult, error) { return p.Parse(ctx, req) })
	}
}

// BenchmarkRawJSONLineSplit is the baseline of the parse benchmarks: the same echo parser and
// the same JSON both ways, natively, with no wasm in between.
func BenchmarkRawJSONLineSplit(b *testing.B) {
	b.Run("PerEvent", func(b *testing.B) {
		req := abi.ParseRequest{Stream: "stdout", Chunk: eventLine}
		for b.Loop() {
			if res, err := nativeParse(req); err != nil || len(res.Events) != 1 {
				b.Fatal(res, err)
			}
		}
	})
	b.Run("MiB", func(b *testing.B) {
		b.SetBytes(int64(len(mebibyte)))
		for b.Loop() {
			parseAll(b, nativeParse)
		}
	})
}

// nativeParse does what a call to the plugin does, minus wasm: request to JSON and back, parse,
// reply to JSON and back.
func nativeParse(req abi.ParseRequest) (abi.ParseResult, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return abi.ParseResult{}, err
	}
	var got abi.ParseRequest
	if err := json.Unmarshal(body, &got); err != nil {
		return abi.ParseResult{}, err
	}
	reply, err := json.Marshal(struct {
		OK abi.ParseResult `json:"ok"`
	}{echo.Parse(got)})
	if err != nil {
		return abi.ParseResult{}, err
	}
	var r abi.Reply
	var res abi.ParseResult
	dec := json.NewDecoder(bytes.NewReader(reply))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return res, err
	}
	dec = json.NewDecoder(bytes.NewReader(r.OK))
	dec.DisallowUnknownFields()
	return res, dec.Decode(&res)
}

func parseAll(b *testing.B, parse func(abi.ParseRequest) (abi.ParseResult, error)) {
	state, events := "", 0
	for off := 0; off < len(mebibyte); off += chunkSize {
		res, err := parse(abi.ParseRequest{Stream: "stdout", Chunk: mebibyte[off:min(off+chunkSize, len(mebibyte))], State: state})
		if err != nil {
			b.Fatal(err)
		}
		state, events = res.State, events+len(res.Events)
	}
	if want := len(mebibyte) / 80; events != want {
		b.Fatalf("%d events from 1 MiB, want %d", events, want)
	}
}

// BenchmarkLoadWarmCache is a process start with the compiled module on disk: a new runtime,
// Load (compile from cache, instantiate, version, describe), close.
func BenchmarkLoadWarmCache(b *testing.B) {
	module := guest(b, "good")
	dir := b.TempDir()
	loadOnce(b, dir, module)
	for b.Loop() {
		loadOnce(b, dir, module)
	}
}

// BenchmarkLoadCold is the same with an empty cache, so every iteration compiles the module.
func BenchmarkLoadCold(b *testing.B) {
	module := guest(b, "good")
	for b.Loop() {
		dir, err := os.MkdirTemp(b.TempDir(), "cold-")
		if err != nil {
			b.Fatal(err)
		}
		loadOnce(b, dir, module)
	}
}

func loadOnce(b *testing.B, cacheDir string, module []byte) {
	ctx := context.Background()
	r, err := wasm.NewRuntime(ctx, wasm.Options{CacheDir: cacheDir})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close(ctx)
	if _, err := harness.Load(ctx, r, module); err != nil {
		b.Fatal(err)
	}
}
