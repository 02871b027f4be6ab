package snapshots

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gocloud.dev/blob/memblob"
	"golang.org/x/sys/unix"
)

var meta = Meta{SessionID: "sess_1", SandboxID: "sbx_1", EventsCursor: 42}

func TestRoundTripKeepsEveryEntryType(t *testing.T) {
	requireRoot(t)
	ctx := context.Background()
	bucket, _ := testBucket(t)
	s := NewStore(bucket, t.TempDir(), Options{})
	upper := t.TempDir()
	buildEveryType(t, upper)
	want := walk(t, upper)

	m, st, err := s.Snapshot(ctx, upper, nil, meta)
	if err != nil {
		t.Fatal(err)
	}
	if st.FilesRead != st.Files || st.FilesReused != 0 || st.ChunksUploaded == 0 {
		t.Errorf("cold snapshot stats = %+v", st)
	}
	if m.Version != 1 || m.ParentID != "" || m.SessionID != "sess_1" || m.EventsCursor != 42 || !strings.HasPrefix(m.ID, "snap_") {
		t.Errorf("manifest header = %+v", m.Summary())
	}
	types := map[EntryType]int{}
	for _, e := range m.Entries {
		types[e.Type]++
	}
	for _, typ := range []EntryType{TypeDir, TypeFile, TypeSymlink, TypeHardlink, TypeWhiteout, TypeFifo} {
		if types[typ] == 0 {
			t.Errorf("manifest has no %s entry", typ)
		}
	}

	loaded, err := s.Load(ctx, "sess_1", m.ID)
	if err != nil {
		t.Fatal(err)
	}
	restored := t.TempDir()
	rst, err := s.Restore(ctx, loaded, restored)
	if err != nil {
		t.Fatal(err)
	}
	assertSameTree(t, want, walk(t, restored))
	if rst.ChunksDownloaded != 0 || rst.ChunksFromCache != rst.Chunks {
		t.Errorf("restore on the snapshotting host should read only the cache: %+v", rst)
	}
}

func TestRestoreOnSecondHostDownloadsAndMatches(t *testing.T) {
	requireRoot(t)
	ctx := context.Background()
	bucket, _ := testBucket(t)
	upper := t.TempDir()
	buildEveryType(t, upper)
	m, _, err := NewStore(bucket, t.TempDir(), Options{}).Snapshot(ctx, upper, nil, meta)
	if err != nil {
		t.Fatal(err)
	}

	second := NewStore(bucket, t.TempDir(), Options{})
	restored := t.TempDir()
	st, err := second.Restore(ctx, m, restored)
	if err != nil {
		t.Fatal(err)
	}
	assertSameTree(t, walk(t, upper), walk(t, restored))
	if st.ChunksDownloaded != len(uniqueChunks(m)) || st.BytesDownloaded < 5<<20 {
		t.Errorf("fresh host restore stats = %+v", st)
	}
	again := t.TempDir()
	if st, err = second.Restore(ctx, m, again); err != nil {
		t.Fatal(err)
	}
	if st.ChunksDownloaded != 0 {
		t.Errorf("second restore on the same host downloaded %d chunks", st.ChunksDownloaded)
	}
}

func TestIncrementalSnapshotUploadsOnlyChangedChunks(t *testing.T) {
	requireRoot(t)
	ctx := context.Background()
	bucket, _ := testBucket(t)
	s := NewStore(bucket, t.TempDir(), Options{})
	upper := t.TempDir()
	big := filepath.Join(upper, "data", "big.bin")
	writeFile(t, big, seededBytes(1, 20<<20), 0o644)
	writeFile(t, filepath.Join(upper, "small"), []byte("small"), 0o644)
	first, st1, err := s.Snapshot(ctx, upper, nil, meta)
	if err != nil {
		t.Fatal(err)
	}
	if st1.BytesUploaded < 20<<20 {
		t.Fatalf("first snapshot uploaded %d bytes of 20 MiB", st1.BytesUploaded)
	}

	f, err := os.OpenFile(big, os.O_WRONLY, 0)
	must(t, err)
	_, err = f.WriteAt(seededBytes(2, 1<<20), 7<<20)
	must(t, errors.Join(err, f.Close()))

	second, st2, err := s.Snapshot(ctx, upper, first, meta)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("changed 1 MiB of 20 MiB: uploaded %d chunks, %d bytes (of %d chunks)", st2.ChunksUploaded, st2.BytesUploaded, st2.Chunks)
	// The chunks overlapping the changed MiB, and at most one more before the cut points
	// resynchronise: with chunks of up to 4 MiB that is well under half the file.
	if st2.ChunksUploaded == 0 || st2.ChunksUploaded > 5 || st2.BytesUploaded > 8<<20 {
		t.Errorf("incremental snapshot uploaded %d chunks / %d bytes, want the few around the change", st2.ChunksUploaded, st2.BytesUploaded)
	}
	if st2.FilesRead != 1 || st2.FilesReused != 1 {
		t.Errorf("read %d files, reused %d; want only the changed file read", st2.FilesRead, st2.FilesReused)
	}
	if second.Version != 2 || second.ParentID != first.ID {
		t.Errorf("second manifest version %d parent %q, want 2 and %q", second.Version, second.ParentID, first.ID)
	}
	restored := t.TempDir()
	if _, err := NewStore(bucket, t.TempDir(), Options{}).Restore(ctx, second, restored); err != nil {
		t.Fatal(err)
	}
	assertSameTree(t, walk(t, upper), walk(t, restored))
}

func TestUnchangedTreeWithBaseUploadsAndReadsNothing(t *testing.T) {
	requireRoot(t)
	ctx := context.Background()
	bucket, _ := testBucket(t)
	s := NewStore(bucket, t.TempDir(), smallChunks)
	upper := t.TempDir()
	buildEveryType(t, upper)
	first, _, err := s.Snapshot(ctx, upper, nil, meta)
	if err != nil {
		t.Fatal(err)
	}
	second, st, err := s.Snapshot(ctx, upper, first, meta)
	if err != nil {
		t.Fatal(err)
	}
	if st.ChunksUploaded != 0 || st.BytesUploaded != 0 || st.FilesRead != 0 || st.BytesRead != 0 || st.FilesReused != st.Files {
		t.Errorf("unchanged snapshot stats = %+v", st)
	}
	if second.ChunkCount != first.ChunkCount || second.TotalSize != first.TotalSize {
		t.Errorf("unchanged tree: chunks %d→%d, size %d→%d", first.ChunkCount, second.ChunkCount, first.TotalSize, second.TotalSize)
	}
}

func TestCorruptChunkIsNamed(t *testing.T) {
	requireRoot(t)
	ctx := context.Background()
	bucket, bucketDir := testBucket(t)
	cache := t.TempDir()
	s := NewStore(bucket, cache, Options{})
	upper := t.TempDir()
	writeFile(t, filepath.Join(upper, "f"), []byte("precious content"), 0o644)
	m, _, err := s.Snapshot(ctx, upper, nil, meta)
	if err != nil {
		t.Fatal(err)
	}
	sum := m.Entries[1].Chunks[0].SHA256
	must(t, os.WriteFile(filepath.Join(bucketDir, "chunks", sum[:2], sum), []byte("tampered content"), 0o644))

	t.Run("a fresh host refuses the bucket's bad copy", func(t *testing.T) {
		_, err := NewStore(bucket, t.TempDir(), Options{}).Restore(ctx, m, t.TempDir())
		if !errors.Is(err, ErrCorruptChunk) || !strings.Contains(err.Error(), sum) {
			t.Fatalf("restore error = %v, want ErrCorruptChunk naming %s", err, sum)
		}
	})
	t.Run("a bad cached copy is replaced from the bucket, which is bad too", func(t *testing.T) {
		must(t, os.WriteFile(s.cachePath(sum), []byte("bit rot"), 0o600))
		_, err := s.Restore(ctx, m, t.TempDir())
		if !errors.Is(err, ErrCorruptChunk) {
			t.Fatalf("restore error = %v, want ErrCorruptChunk", err)
		}
	})
}

func TestRestoreRejectsHostileManifests(t *testing.T) {
	requireRoot(t)
	ctx := context.Background()
	bucket, _ := testBucket(t)
	s := NewStore(bucket, t.TempDir(), Options{})
	outside := t.TempDir()
	root := Entry{Path: ".", Type: TypeDir, Mode: 0o755}
	dir := func(p string) Entry { return Entry{Path: RawString(p), Type: TypeDir, Mode: 0o755} }
	empty := func(p string) Entry { return Entry{Path: RawString(p), Type: TypeFile, Mode: 0o644} }
	link := func(p, target string) Entry {
		return Entry{Path: RawString(p), Type: TypeSymlink, Mode: 0o777, Target: RawString(target)}
	}
	tests := []struct {
		name    string
		entries []Entry
	}{
		{"dot-dot path", []Entry{root, empty("../escaped")}},
		{"dot-dot inside a path", []Entry{root, dir("a"), empty("a/../../escaped")}},
		{"absolute path", []Entry{root, empty(outside + "/escaped")}},
		{"unclean path", []Entry{root, dir("a"), empty("a//b")}},
		{"file under a symlink to outside", []Entry{root, link("l", outside), empty("l/escaped")}},
		{"dir under a symlink", []Entry{root, link("l", outside), dir("l/sub")}},
		{"path seen twice, symlink second", []Entry{root, dir("a"), link("a", outside)}},
		{"file under a file", []Entry{root, empty("f"), empty("f/escaped")}},
		{"parent missing", []Entry{root, empty("nowhere/escaped")}},
		{"hardlink to outside", []Entry{root, {Path: "h", Type: TypeHardlink, Target: "../escaped"}}},
		{"hardlink to a later entry", []Entry{root, {Path: "h", Type: TypeHardlink, Target: "z"}, empty("z")}},
		{"hardlink to a dir", []Entry{root, dir("d"), {Path: "h", Type: TypeHardlink, Target: "d"}}},
		{"no root entry", []Entry{empty("f")}},
		{"mode beyond permissions", []Entry{root, {Path: "f", Type: TypeFile, Mode: unix.S_IFCHR | 0o644}}},
		{"unknown type", []Entry{root, {Path: "s", Type: "socket"}}},
		{"chunks that do not add up", []Entry{root, {Path: "f", Type: TypeFile, Size: 10, Chunks: []ChunkRef{{SHA256: strings.Repeat("ab", 32), Size: 5}}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &Manifest{Format: FormatVersion, ID: "snap_hostile", SessionID: "sess_1", Entries: tt.entries}
			target := t.TempDir()
			_, err := s.Restore(ctx, m, target)
			if !errors.Is(err, ErrInvalidManifest) {
				t.Fatalf("restore error = %v, want ErrInvalidManifest", err)
			}
			if names, _ := os.ReadDir(target); len(names) > 0 {
				t.Errorf("rejected manifest still created %s in the target", names[0].Name())
			}
			for _, d := range []string{outside, filepath.Dir(target)} {
				if _, err := os.Lstat(filepath.Join(d, "escaped")); err == nil {
					t.Errorf("restore wrote %s/escaped", d)
				}
			}
		})
	}
}

// The manifest check above is the first line; this is the second: even a path that got past it
// is resolved beneath the root without following symlinks.
func TestParentResolutionNeverFollowsSymlinks(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	must(t, os.Symlink(outside, filepath.Join(root, "l")))
	must(t, os.Mkdir(filepath.Join(root, "d"), 0o755))
	must(t, os.Symlink("..", filepath.Join(root, "d", "up")))
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	must(t, err)
	defer unix.Close(fd)
	r := &restorer{root: fd}
	for _, p := range []RawString{"l/x", "d/up/x", "../x", "d/../../x"} {
		pc := r.parents()
		err := pc.do(p, func(dfd int, name string) error {
			return unix.Mkdirat(dfd, name, 0o700)
		})
		pc.close()
		if err == nil {
			t.Errorf("created %q through a symlink or above the root", p)
		}
	}
	if names, _ := os.ReadDir(outside); len(names) > 0 {
		t.Errorf("wrote %s outside the root", names[0].Name())
	}
}

func TestRestoreRefusesNonEmptyDir(t *testing.T) {
	requireRoot(t)
	ctx := context.Background()
	s := NewStore(memblob.OpenBucket(nil), t.TempDir(), Options{})
	upper := t.TempDir()
	writeFile(t, filepath.Join(upper, "f"), []byte("x"), 0o644)
	m, _, err := s.Snapshot(ctx, upper, nil, meta)
	if err != nil {
		t.Fatal(err)
	}
	target := t.TempDir()
	writeFile(t, filepath.Join(target, "already"), nil, 0o644)
	if _, err := s.Restore(ctx, m, target); !errors.Is(err, ErrNotEmpty) {
		t.Fatalf("restore into a non-empty dir: %v, want ErrNotEmpty", err)
	}
}

func TestLoadRefusesUnknownFormat(t *testing.T) {
	ctx := context.Background()
	bucket := memblob.OpenBucket(nil)
	s := NewStore(bucket, t.TempDir(), Options{})
	b, _ := json.Marshal(map[string]any{"format": 2, "id": "snap_x", "entries": []any{}})
	must(t, bucket.WriteAll(ctx, "manifests/sess_1/snap_x.json", b, nil))
	if _, err := s.Load(ctx, "sess_1", "snap_x"); !errors.Is(err, ErrInvalidManifest) || !strings.Contains(err.Error(), "format 2") {
		t.Fatalf("load of format 2: %v", err)
	}
	if _, err := s.Load(ctx, "sess_1", "snap_missing"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("load of a missing manifest: %v", err)
	}
	if _, err := s.Load(ctx, "../sess", "snap_x"); err == nil {
		t.Fatal("load accepted a session id with a path in it")
	}
}

func TestListDeleteAndDeleteSession(t *testing.T) {
	requireRoot(t)
	ctx := context.Background()
	s := NewStore(memblob.OpenBucket(nil), t.TempDir(), Options{})
	upper := t.TempDir()
	var base *Manifest
	for i := range 3 {
		writeFile(t, filepath.Join(upper, fmt.Sprint(i)), []byte("v"), 0o644)
		m, _, err := s.Snapshot(ctx, upper, base, meta)
		if err != nil {
			t.Fatal(err)
		}
		base = m
	}
	list, err := s.List(ctx, "sess_1")
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 3 || list[0].Version != 3 || list[2].Version != 1 || list[0].ID != base.ID {
		t.Fatalf("list = %+v, want versions 3,2,1 newest first", list)
	}
	must(t, s.Delete(ctx, "sess_1", list[1].ID))
	if err := s.Delete(ctx, "sess_1", list[1].ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("second delete: %v, want ErrNotFound", err)
	}
	n, err := s.DeleteSession(ctx, "sess_1")
	if err != nil || n != 2 {
		t.Fatalf("DeleteSession = %d, %v; want 2", n, err)
	}
	if list, _ := s.List(ctx, "sess_1"); len(list) != 0 {
		t.Fatalf("list after DeleteSession = %+v", list)
	}
}

func TestGCKeepsReferencedChunksAndDeletesOrphans(t *testing.T) {
	requireRoot(t)
	ctx := context.Background()
	bucket, _ := testBucket(t)
	s := NewStore(bucket, t.TempDir(), smallChunks)
	shared := randomBytes(300 << 10)
	onlyA, onlyB := randomBytes(200<<10), randomBytes(200<<10)

	upperA, upperB := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(upperA, "shared"), shared, 0o644)
	writeFile(t, filepath.Join(upperA, "mine"), onlyA, 0o644)
	writeFile(t, filepath.Join(upperB, "shared"), shared, 0o644)
	writeFile(t, filepath.Join(upperB, "mine"), onlyB, 0o644)
	a, _, err := s.Snapshot(ctx, upperA, nil, Meta{SessionID: "sess_a"})
	must(t, err)
	b, stB, err := s.Snapshot(ctx, upperB, nil, Meta{SessionID: "sess_b"})
	must(t, err)
	if stB.ChunksUploaded >= stB.Chunks {
		t.Fatalf("session b re-uploaded the chunks it shares with a: %+v", stB)
	}
	orphan := randomBytes(1000)
	orphanKey := chunkKey(hashHex(orphan))
	must(t, bucket.WriteAll(ctx, orphanKey, orphan, nil))

	if n, err := s.GC(ctx, time.Hour); err != nil || n != 0 {
		t.Fatalf("GC with a grace longer than every chunk's age deleted %d, %v", n, err)
	}
	must(t, s.Delete(ctx, "sess_a", a.ID))
	n, err := s.GC(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := 1 + len(chunksOnlyIn(a, b))
	if n != want {
		t.Errorf("GC deleted %d chunks, want %d (a's own chunks and the orphan)", n, want)
	}
	if ok, _ := bucket.Exists(ctx, orphanKey); ok {
		t.Error("orphan chunk survived GC")
	}
	for _, e := range b.Entries {
		for _, c := range e.Chunks {
			if ok, _ := bucket.Exists(ctx, chunkKey(c.SHA256)); !ok {
				t.Errorf("GC deleted chunk %s that b references", c.SHA256)
			}
		}
	}
	restored := t.TempDir()
	_, err = NewStore(bucket, t.TempDir(), Options{}).Restore(ctx, b, restored)
	must(t, err)
	assertSameTree(t, walk(t, upperB), walk(t, restored))

	// This host still believes a's chunks are uploaded; after the GC it must not, or the new
	// manifest would point at deleted chunks.
	again, st, err := s.Snapshot(ctx, upperA, nil, Meta{SessionID: "sess_a"})
	must(t, err)
	if st.ChunksUploaded != len(chunksOnlyIn(a, b)) {
		t.Errorf("re-snapshot after GC uploaded %d chunks, want the %d GC deleted", st.ChunksUploaded, len(chunksOnlyIn(a, b)))
	}
	restored = t.TempDir()
	_, err = NewStore(bucket, t.TempDir(), Options{}).Restore(ctx, again, restored)
	must(t, err)
	assertSameTree(t, walk(t, upperA), walk(t, restored))
}

func TestGCWaitsOutLiveSnapshots(t *testing.T) {
	ctx := context.Background()
	bucket := memblob.OpenBucket(nil)
	s := NewStore(bucket, t.TempDir(), Options{})
	must(t, bucket.WriteAll(ctx, snapshotLeases+"snap_running", nil, nil))
	if _, err := s.GC(ctx, 0); !errors.Is(err, ErrBusy) {
		t.Fatalf("GC during a snapshot: %v, want ErrBusy", err)
	}
	stale := NewStore(bucket, t.TempDir(), Options{LeaseTTL: time.Nanosecond})
	if _, err := stale.GC(ctx, 0); err != nil {
		t.Fatalf("GC past a stale lease: %v", err)
	}
}

func TestSnapshotWaitsForGC(t *testing.T) {
	requireRoot(t)
	bucket := memblob.OpenBucket(nil)
	s := NewStore(bucket, t.TempDir(), Options{})
	must(t, bucket.WriteAll(context.Background(), gcLeases+"gc_running", nil, nil))
	upper := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if _, _, err := s.Snapshot(ctx, upper, nil, meta); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("snapshot during GC: %v, want it to wait until its deadline", err)
	}
	if keys, _ := s.keys(context.Background(), "manifests/"); len(keys) != 0 {
		t.Fatalf("snapshot during GC wrote %v", keys)
	}
}

func uniqueChunks(m *Manifest) map[string]struct{} {
	return chunksOnlyIn(m, &Manifest{})
}

func chunksOnlyIn(a, b *Manifest) map[string]struct{} {
	inB := make(map[string]struct{})
	for _, e := range b.Entries {
		for _, c := range e.Chunks {
			inB[c.SHA256] = struct{}{}
		}
	}
	out := make(map[string]struct{})
	for _, e := range a.Entries {
		for _, c := range e.Chunks {
			if _, ok := inB[c.SHA256]; !ok {
				out[c.SHA256] = struct{}{}
			}
		}
	}
	return out
}

func TestCowStateCountsDirtyFilesWithoutReading(t *testing.T) {
	requireRoot(t)
	ctx := context.Background()
	s := NewStore(memblob.OpenBucket(nil), t.TempDir(), smallChunks)
	upper := t.TempDir()
	writeFile(t, filepath.Join(upper, "keep"), randomBytes(100<<10), 0o644)
	writeFile(t, filepath.Join(upper, "change"), []byte("before"), 0o644)
	writeFile(t, filepath.Join(upper, "drop"), []byte("gone soon"), 0o644)
	base, _, err := s.Snapshot(ctx, upper, nil, meta)
	must(t, err)

	cs, err := s.CowState(upper, base)
	must(t, err)
	if cs.DirtyFiles != 0 || cs.Deleted != 0 || cs.BaseChunks == 0 || cs.BaseChunksCached != cs.BaseChunks {
		t.Errorf("cow state of an unchanged tree = %+v", cs)
	}

	writeFile(t, filepath.Join(upper, "change"), []byte("after!!"), 0o644)
	writeFile(t, filepath.Join(upper, "new"), []byte("fresh"), 0o644)
	must(t, os.Remove(filepath.Join(upper, "drop")))
	must(t, os.RemoveAll(filepath.Join(s.cacheDir, "chunks")))
	cs, err = s.CowState(upper, base)
	must(t, err)
	want := CowState{Files: 3, Bytes: 100<<10 + 7 + 5, DirtyFiles: 2, DirtyBytes: 12, DirtyChunks: 2, Deleted: 1, BaseChunks: cs.BaseChunks}
	if cs != want {
		t.Errorf("cow state = %+v, want %+v", cs, want)
	}
}

func TestFiftySnapshotRestoreCyclesStayIdentical(t *testing.T) {
	requireRoot(t)
	ctx := context.Background()
	bucket, _ := testBucket(t)
	s := NewStore(bucket, t.TempDir(), smallChunks)
	elsewhere := NewStore(bucket, t.TempDir(), smallChunks)
	upper := t.TempDir()
	writeFile(t, filepath.Join(upper, "log"), nil, 0o644)
	var base *Manifest
	for i := range 50 {
		src := filepath.Join(upper, "src", fmt.Sprintf("f%02d.go", i%7))
		os.Remove(src) // it may be a whiteout from an earlier cycle
		writeFile(t, src, randomBytes(1000+i*97), 0o644)
		f, err := os.OpenFile(filepath.Join(upper, "log"), os.O_APPEND|os.O_WRONLY, 0)
		must(t, err)
		_, err = f.Write(randomBytes(3000))
		must(t, errors.Join(err, f.Close()))
		switch i % 5 {
		case 1:
			must(t, os.RemoveAll(filepath.Join(upper, "src", fmt.Sprintf("f%02d.go", (i+3)%7))))
			must(t, unix.Mknod(filepath.Join(upper, "src", fmt.Sprintf("f%02d.go", (i+3)%7)), unix.S_IFCHR, 0))
		case 2:
			must(t, os.Symlink(fmt.Sprintf("../log.%d", i), filepath.Join(upper, fmt.Sprintf("link%d", i))))
		case 3:
			must(t, os.Chmod(filepath.Join(upper, "log"), os.FileMode(0o600|i)&0o777))
		case 4:
			must(t, os.MkdirAll(filepath.Join(upper, "dirs", fmt.Sprint(i)), 0o750))
			must(t, unix.Setxattr(filepath.Join(upper, "dirs", fmt.Sprint(i)), "trusted.overlay.opaque", []byte("y"), 0))
		}
		m, st, err := s.Snapshot(ctx, upper, base, meta)
		if err != nil {
			t.Fatalf("cycle %d: %v", i, err)
		}
		if base != nil && st.FilesReused == 0 {
			t.Errorf("cycle %d reused no file: %+v", i, st)
		}
		restorer := s
		if i%2 == 1 {
			restorer = elsewhere
		}
		restored := t.TempDir()
		if _, err := restorer.Restore(ctx, m, restored); err != nil {
			t.Fatalf("cycle %d: %v", i, err)
		}
		assertSameTree(t, walk(t, upper), walk(t, restored))
		if t.Failed() {
			t.Fatalf("cycle %d differs", i)
		}
		base = m
	}
}

func TestAdoptedRestoreIsCleanUntilChanged(t *testing.T) {
	requireRoot(t)
	ctx := context.Background()
	s := NewStore(memblob.OpenBucket(nil), t.TempDir(), smallChunks)
	upper := t.TempDir()
	writeFile(t, filepath.Join(upper, "a"), randomBytes(100<<10), 0o644)
	writeFile(t, filepath.Join(upper, "b"), []byte("small"), 0o600)
	m, _, err := s.Snapshot(ctx, upper, nil, meta)
	must(t, err)
	restored := t.TempDir()
	_, err = s.Restore(ctx, m, restored)
	must(t, err)
	if cs, _ := s.CowState(restored, m); cs.DirtyFiles != 2 {
		t.Fatalf("a fresh restore against the original manifest has %d dirty files; the test assumes new inodes", cs.DirtyFiles)
	}
	adopted, err := s.Adopt(m, restored)
	must(t, err)
	if cs, _ := s.CowState(restored, adopted); cs.DirtyFiles != 0 || cs.Deleted != 0 {
		t.Fatalf("cow state right after an adopted restore = %+v, want clean", cs)
	}
	writeFile(t, filepath.Join(restored, "b"), []byte("SMALL"), 0o600)
	if cs, _ := s.CowState(restored, adopted); cs.DirtyFiles != 1 {
		t.Fatalf("after one change: %+v", cs)
	}
	if _, st, err := s.Snapshot(ctx, restored, adopted, meta); err != nil || st.FilesRead != 1 || st.FilesReused != 1 {
		t.Fatalf("snapshot on the adopted base read %d files, reused %d (%v); want 1 and 1", st.FilesRead, st.FilesReused, err)
	}
}
