package snapshots

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"
)

const benchTreeBytes = 100 << 20

// benchTree writes 100 MiB of fresh random files: 16 of 4 MiB and 288 of 128 KiB in 8 dirs, a
// mix of the large build outputs and many small sources a session leaves behind.
func benchTree(b *testing.B) string {
	b.Helper()
	dir := b.TempDir()
	for i := range 16 {
		writeFile(b, filepath.Join(dir, "out", fmt.Sprintf("blob%02d.bin", i)), randomBytes(4<<20), 0o644)
	}
	for i := range 288 {
		writeFile(b, filepath.Join(dir, "src", fmt.Sprint(i%8), fmt.Sprintf("f%03d.txt", i)), randomBytes(128<<10), 0o644)
	}
	return dir
}

// benchBucket is a fileblob bucket on local disk, in a dir the caller removes. It writes no
// .attrs sidecars: those (a second file and an MD5 per chunk) are fileblob's own cost, which a
// real bucket does not have, and creating a file costs ~1 ms on this VM's disk.
func benchBucket(b *testing.B, dir string) *blob.Bucket {
	b.Helper()
	bucket, err := fileblob.OpenBucket(dir, &fileblob.Options{CreateDir: true, NoTempDir: true, Metadata: fileblob.MetadataDontWrite})
	if err != nil {
		b.Fatal(err)
	}
	return bucket
}

func BenchmarkSnapshot100MiB(b *testing.B) {
	requireRoot(b)
	ctx := context.Background()
	tree := benchTree(b)
	work := b.TempDir()
	b.SetBytes(benchTreeBytes)
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		run := filepath.Join(work, fmt.Sprint(i))
		bucket := benchBucket(b, filepath.Join(run, "bucket"))
		s := NewStore(bucket, filepath.Join(run, "cache"), Options{})
		b.StartTimer()
		if _, _, err := s.Snapshot(ctx, tree, nil, meta); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		bucket.Close()
		must(b, os.RemoveAll(run))
		b.StartTimer()
	}
}

// BenchmarkSnapshotUnchanged100MiB is the common case of a session's later snapshots: the tree
// did not change since base, so nothing is read or uploaded.
func BenchmarkSnapshotUnchanged100MiB(b *testing.B) {
	ctx := context.Background()
	s, tree, base := benchSnapshot(b)
	b.SetBytes(benchTreeBytes)
	b.ResetTimer()
	for range b.N {
		if _, st, err := s.Snapshot(ctx, tree, base, meta); err != nil || st.FilesRead != 0 {
			b.Fatalf("unchanged snapshot read %d files: %v", st.FilesRead, err)
		}
	}
}

func BenchmarkRestore100MiB(b *testing.B) {
	ctx := context.Background()
	s, _, m := benchSnapshot(b)
	work := b.TempDir()
	b.SetBytes(benchTreeBytes)
	b.ResetTimer()
	for i := range b.N {
		target := filepath.Join(work, fmt.Sprint(i))
		must(b, os.Mkdir(target, 0o755))
		st, err := s.Restore(ctx, m, target)
		if err != nil {
			b.Fatal(err)
		}
		if st.ChunksDownloaded != 0 {
			b.Fatalf("restore downloaded %d chunks; the benchmark measures restores from the cache", st.ChunksDownloaded)
		}
		b.StopTimer()
		must(b, os.RemoveAll(target))
		b.StartTimer()
	}
}

// The tar baselines use Go's archive/tar on a file on the same disk: what a snapshot without
// chunking, dedup or a blob store would cost.

func BenchmarkTarCreate100MiB(b *testing.B) {
	tree := benchTree(b)
	archive := filepath.Join(b.TempDir(), "tree.tar")
	b.SetBytes(benchTreeBytes)
	b.ResetTimer()
	for range b.N {
		must(b, tarCreate(tree, archive))
	}
}

func BenchmarkTarExtract100MiB(b *testing.B) {
	tree := benchTree(b)
	archive := filepath.Join(b.TempDir(), "tree.tar")
	must(b, tarCreate(tree, archive))
	work := b.TempDir()
	b.SetBytes(benchTreeBytes)
	b.ResetTimer()
	for i := range b.N {
		target := filepath.Join(work, fmt.Sprint(i))
		must(b, tarExtract(archive, target))
		b.StopTimer()
		must(b, os.RemoveAll(target))
		b.StartTimer()
	}
}

func tarCreate(dir, archive string) error {
	f, err := os.Create(archive)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		hdr, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		hdr.Name = filepath.ToSlash(rel)
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			return nil
		}
		src, err := os.Open(p)
		if err != nil {
			return err
		}
		_, err = io.Copy(tw, src)
		src.Close()
		return err
	})
	if err != nil {
		f.Close()
		return err
	}
	if err := tw.Close(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// tarExtract handles the directories and regular files benchTree makes, with modes and mtimes.
func tarExtract(archive, dir string) error {
	f, err := os.Open(archive)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		p := filepath.Join(dir, filepath.FromSlash(hdr.Name))
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, hdr.FileInfo().Mode().Perm()); err != nil {
				return err
			}
		case tar.TypeReg:
			out, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, hdr.FileInfo().Mode().Perm())
			if err != nil {
				return err
			}
			_, err = io.Copy(out, tr)
			if err := errors.Join(err, out.Close()); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s: tar type %c not in the benchmark tree", hdr.Name, hdr.Typeflag)
		}
		if err := os.Chtimes(p, hdr.ModTime, hdr.ModTime); err != nil {
			return err
		}
	}
}

// benchSnapshot is a store holding one snapshot of a fresh benchTree, for the benchmarks that
// start from one.
func benchSnapshot(b *testing.B) (*Store, string, *Manifest) {
	b.Helper()
	requireRoot(b)
	tree := benchTree(b)
	bucket := benchBucket(b, b.TempDir())
	b.Cleanup(func() { bucket.Close() })
	s := NewStore(bucket, b.TempDir(), Options{})
	m, _, err := s.Snapshot(context.Background(), tree, nil, meta)
	if err != nil {
		b.Fatal(err)
	}
	return s, tree, m
}
