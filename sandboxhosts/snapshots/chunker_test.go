package snapshots

import (
	"bytes"
	"fmt"
	"testing"

	"golang.org/x/sync/errgroup"
)

// cutSizes cuts data with o and returns the chunk sizes, checking that the chunks put back
// together are data.
func cutSizes(tb testing.TB, data []byte, o Options) []int {
	tb.Helper()
	var sizes []int
	var joined bytes.Buffer
	err := cut(bytes.NewReader(data), int64(len(data)), o, func(c []byte) error {
		sizes = append(sizes, len(c))
		joined.Write(c)
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	if !bytes.Equal(joined.Bytes(), data) {
		tb.Fatalf("the %d chunks of %d bytes do not put back together", len(sizes), len(data))
	}
	return sizes
}

func TestChunksKeepWithinTheConfiguredSizes(t *testing.T) {
	o := Options{}.withDefaults()
	data := seededBytes(29, 32<<20)
	sizes := cutSizes(t, data, o)
	for i, n := range sizes[:len(sizes)-1] {
		if n < o.MinChunkSize || n > o.MaxChunkSize {
			t.Errorf("chunk %d is %d bytes, outside %d..%d", i, n, o.MinChunkSize, o.MaxChunkSize)
		}
	}
	if last := sizes[len(sizes)-1]; last > o.MaxChunkSize {
		t.Errorf("last chunk is %d bytes, over %d", last, o.MaxChunkSize)
	}
	// The average is the dedupe granularity the defaults promise: it must stay near AvgChunkSize
	// (the data is fixed, so this is not a statistical assertion that can flake).
	if avg := len(data) / len(sizes); avg < o.AvgChunkSize/2 || avg > 2*o.AvgChunkSize {
		t.Errorf("average chunk is %d bytes over %d chunks, want about %d", avg, len(sizes), o.AvgChunkSize)
	}
}

func TestChunkSizesAreValidated(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    Options
		ok   bool
	}{
		{"the defaults", Options{}, true},
		{"small powers of two", smallChunks, true},
		{"min not below avg", Options{MinChunkSize: 1 << 20, AvgChunkSize: 1 << 20}, false},
		{"avg not below max", Options{AvgChunkSize: 4 << 20}, false},
		{"avg not a power of two", Options{AvgChunkSize: 1000 << 10}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.o.withDefaults().validate(); (err == nil) != tc.ok {
				t.Errorf("validate() = %v, want ok %v", err, tc.ok)
			}
		})
	}
}

func TestAnEditCutsOnlyTheChunksAroundIt(t *testing.T) {
	data := seededBytes(7, 8<<20)
	edited := bytes.Clone(data)
	copy(edited[4<<20:], "an edit in the middle of the file")
	hashes := func(b []byte) map[string]bool {
		m := map[string]bool{}
		off := 0
		for _, n := range cutSizes(t, b, smallChunks.withDefaults()) {
			m[string(b[off:off+n])] = true
			off += n
		}
		return m
	}
	before, after := hashes(data), hashes(edited)
	changed := 0
	for c := range after {
		if !before[c] {
			changed++
		}
	}
	if changed == 0 || changed > 2 {
		t.Errorf("%d of %d chunks changed after a 33-byte edit, want 1 or 2", changed, len(after))
	}
}

// TestConcurrentChunkersCutAsOneDoesAlone runs chunkers at once. `make test` runs it under the
// race detector (RACE_TESTS): the previous chunker library shared a table that creating a
// chunker rewrote, which took a process-wide lock to make safe.
func TestConcurrentChunkersCutAsOneDoesAlone(t *testing.T) {
	o := smallChunks.withDefaults()
	inputs := make([][]byte, 6)
	want := make([][]int, len(inputs))
	for i := range inputs {
		inputs[i] = seededBytes(uint64(100+i), 1<<20)
		want[i] = cutSizes(t, inputs[i], o)
	}
	var g errgroup.Group
	for round := range 3 {
		for i := range inputs {
			g.Go(func() error {
				got := cutSizes(t, inputs[i], o)
				if fmt.Sprint(got) != fmt.Sprint(want[i]) {
					return fmt.Errorf("round %d, input %d: cut into %v at once with others, %v alone", round, i, got, want[i])
				}
				return nil
			})
		}
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkCut measures the chunker alone (no hashing, no upload) on random data, one chunker
// and as many at once as there are processors, with the default sizes.
func BenchmarkCut(b *testing.B) {
	o := Options{}.withDefaults()
	data := seededBytes(1, 64<<20)
	b.Run("serial", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for range b.N {
			cutCount(b, data, o)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				cutCount(b, data, o)
			}
		})
	})
}

func cutCount(b *testing.B, data []byte, o Options) {
	n := 0
	if err := cut(bytes.NewReader(data), int64(len(data)), o, func([]byte) error { n++; return nil }); err != nil || n == 0 {
		b.Errorf("cut into %d chunks: %v", n, err)
	}
}
