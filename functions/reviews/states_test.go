package reviews

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// docs/reviews.md's state table is this package's: the same states, in order, with the same
// moves.
func TestTheDocumentedStateTableIsTheCodes(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../docs/reviews.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start := strings.Index(doc, "# Reviews\n")
	if start < 0 {
		t.Fatal("docs/reviews.md has no Reviews heading")
	}
	row := regexp.MustCompile("(?m)^  \\| `([a-z]+)` \\| *((?:`[a-z]+`(?:, )?)*) *\\|")
	var documentedStates []string
	for _, m := range row.FindAllStringSubmatch(doc[start:], -1) {
		if !isState(m[1]) {
			continue
		}
		documentedStates = append(documentedStates, m[1])
		var moves []string
		for _, to := range regexp.MustCompile("`([a-z]+)`").FindAllStringSubmatch(m[2], -1) {
			moves = append(moves, to[1])
		}
		for _, to := range States() {
			if CanMove(m[1], to) != slices.Contains(moves, to) {
				t.Errorf("docs/reviews.md says %s → %s is %v; the code says %v", m[1], to, slices.Contains(moves, to), CanMove(m[1], to))
			}
		}
	}
	if !slices.Equal(documentedStates, States()) {
		t.Fatalf("docs/reviews.md lists states %v, the code %v", documentedStates, States())
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
