package reviews

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The README's review state table is this package's: the same states, in order, with the same
// moves.
func TestTheReadmeStateTableIsTheCodes(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	start := strings.Index(readme, "### Reviews\n")
	if start < 0 {
		t.Fatal("README.md has no Reviews section")
	}
	row := regexp.MustCompile("(?m)^  \\| `([a-z]+)` \\| *((?:`[a-z]+`(?:, )?)*) *\\|")
	var readmeStates []string
	for _, m := range row.FindAllStringSubmatch(readme[start:], -1) {
		if !isState(m[1]) {
			continue
		}
		readmeStates = append(readmeStates, m[1])
		var moves []string
		for _, to := range regexp.MustCompile("`([a-z]+)`").FindAllStringSubmatch(m[2], -1) {
			moves = append(moves, to[1])
		}
		for _, to := range States() {
			if CanMove(m[1], to) != slices.Contains(moves, to) {
				t.Errorf("README says %s → %s is %v; the code says %v", m[1], to, slices.Contains(moves, to), CanMove(m[1], to))
			}
		}
	}
	if !slices.Equal(readmeStates, States()) {
		t.Fatalf("README lists states %v, the code %v", readmeStates, States())
	}
}

func TestStateTableEndsOnlyInFinalStates(t *testing.T) {
	t.Parallel()
	for _, s := range States() {
		moves := slices.ContainsFunc(States(), func(to string) bool { return CanMove(s, to) })
		if ended(s) == moves {
			t.Errorf("state %s: ended %v but has moves %v", s, ended(s), moves)
		}
	}
}
