package supervisor

import (
	"bytes"
	"testing"
)

func TestRingKeepsTheNewestBytesByOffset(t *testing.T) {
	const capacity = 10
	tests := []struct {
		name   string
		writes []int // sizes; byte k of the stream has value k%251
	}{
		{"under the cap", []int{3, 4}},
		{"exactly the cap", []int{4, 6}},
		{"crossing the cap wraps", []int{7, 6}},
		{"many small writes wrap repeatedly", []int{3, 3, 3, 3, 3, 3, 3, 3, 3}},
		{"one write larger than the cap", []int{2, 25}},
		{"a write of exactly the cap after wrapping", []int{7, 10, 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newRing(capacity)
			var all []byte
			for _, n := range tc.writes {
				p := make([]byte, n)
				for i := range p {
					p[i] = byte((len(all) + i) % 251)
				}
				all = append(all, p...)
				r.write(p)
			}
			if r.end != int64(len(all)) {
				t.Fatalf("end %d, want %d", r.end, len(all))
			}
			wantStart := max(0, len(all)-capacity)
			if r.start() != int64(wantStart) {
				t.Fatalf("start %d, want %d", r.start(), wantStart)
			}
			for from := wantStart; from <= len(all); from++ {
				got := make([]byte, 0, len(all))
				buf := make([]byte, 3) // small reads cross the wrap point
				for off := int64(from); ; {
					n := r.readAt(buf, off)
					if n == 0 {
						break
					}
					got = append(got, buf[:n]...)
					off += int64(n)
				}
				if !bytes.Equal(got, all[from:]) {
					t.Errorf("read from %d = %v, want %v", from, got, all[from:])
				}
			}
		})
	}
}
