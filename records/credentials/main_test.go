package credentials_test

import (
	"os"
	"testing"

	"github.com/hangar-dev/hangar/internal/testenv"
)

// TestMain fails the package when a query its tests ran needs a Firestore index production lacks.
func TestMain(m *testing.M) { os.Exit(testenv.MainCheckingIndexes(m)) }
