package testenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"cloud.google.com/go/firestore/apiv1/firestorepb"

	"github.com/hangar-dev/hangar/internal/fsindex"
	"github.com/hangar-dev/hangar/platform/store"
)

// IndexesFile is the repository's firestore.indexes.json, relative to the module root.
const IndexesFile = "firestore.indexes.json"

// MainCheckingIndexes runs a package's tests (call it from TestMain) recording every Firestore
// query they run, and, when they pass, fails unless firestore.indexes.json has the composite
// index each query needs in production (fsindex states the rule). It returns the exit code.
func MainCheckingIndexes(m *testing.M) int {
	var mu sync.Mutex
	var queries []fsindex.Query
	store.RecordQueries(func(q *firestorepb.StructuredQuery) {
		s := fsindex.Shape(q)
		mu.Lock()
		queries = append(queries, s)
		mu.Unlock()
	})
	if code := m.Run(); code != 0 {
		return code
	}
	mu.Lock()
	defer mu.Unlock()
	path, err := moduleFile(IndexesFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: firestore indexes:", err)
		return 1
	}
	f, err := fsindex.Read(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: firestore indexes:", err)
		return 1
	}
	missing := f.Missing(queries)
	if len(missing) == 0 {
		return 0
	}
	fmt.Fprintf(os.Stderr, "FAIL: the tests ran %d Firestore queries that production refuses without a composite index %s lacks; add:\n", len(missing), IndexesFile)
	for _, idx := range missing {
		fmt.Fprintf(os.Stderr, "    %s,\n", idx)
	}
	return 1
}

// moduleFile is name in the module's root, the nearest directory up with a go.mod.
func moduleFile(name string) (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, name), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}
