package registryauth

import (
	"strconv"
	"testing"
	"time"
)

func TestAFullCacheDropsWhatExpired(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 5, 1, 8, 0, 0, 0, time.UTC)
	m := map[string]cached[int]{}
	for i := range maxCached {
		until := now.Add(-time.Second) // expired
		if i%2 == 0 {
			until = now.Add(time.Minute)
		}
		put(m, strconv.Itoa(i), i, until, now.Add(-time.Hour))
	}
	if len(m) != maxCached {
		t.Fatalf("%d entries before the cache was full, want %d", len(m), maxCached)
	}
	put(m, "new", 1, now.Add(time.Minute), now)
	if len(m) != maxCached/2+1 {
		t.Fatalf("%d entries after a put into a full cache, want the %d live ones and the new one", len(m), maxCached/2)
	}
	if _, ok := m["1"]; ok {
		t.Fatal("an expired entry stayed")
	}
}
