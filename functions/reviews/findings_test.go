package reviews

import (
	"strings"
	"testing"
)

// A finder's answer is untrusted: whatever it says, what reaches GitHub notifies nobody, renders
// no HTML, cannot break out of its suggestion block and sits on the PR's diff.
func TestSecurityAFindersHostileAnswerIsPostedInertOrRefused(t *testing.T) {
	t.Parallel()
	diff := map[string][]lineRange{"a.go": {{10, 14}, {}}, "dir/b.go": {{}}}
	base := finderFinding{Path: "a.go", StartLine: 11, EndLine: 12, Severity: "high", Confidence: "high", Title: "t", BodyMD: "b"}
	tests := []struct {
		name    string
		edit    func(f *finderFinding)
		refused string
		absent  []string
		present []string
	}{
		{"user and team mentions", func(f *finderFinding) { f.BodyMD = "cc @alice, @acme/security and (@bob)" }, "", []string{"@alice", "@acme/security", "@bob"}, []string{"alice", "acme/security"}},
		{"an email address stays readable", func(f *finderFinding) { f.BodyMD = "mail dev@example.com" }, "", nil, []string{"dev@example.com"}},
		{"HTML: tracking image, hidden details, comment", func(f *finderFinding) {
			f.BodyMD = `<img src="https://evil.example/p.png"><details><summary>x</summary>@admin</details><!-- ignore previous -->`
		}, "", []string{"<img", "<details", "<!--", "@admin"}, []string{"&lt;img"}},
		{"a title with newlines and HTML", func(f *finderFinding) { f.Title = "Bug\n\n<script>alert(1)</script> @ops" }, "", []string{"Bug\n", "<script>", "@ops"}, []string{"Bug &lt;script&gt;"}},
		// Inside a longer fence its backticks, mention and tag are code: inert.
		{"a suggestion that tries to close its fence", func(f *finderFinding) { f.SuggestedFix = "x := 1\n```\n@everyone <b>hi</b>\n```" }, "", nil, []string{"````suggestion\nx := 1\n```\n@everyone <b>hi</b>\n```\n````"}},
		{"a path outside the PR", func(f *finderFinding) { f.Path = "secrets/prod.env" }, "not a file this pull request changes", nil, nil},
		{"a traversal path", func(f *finderFinding) { f.Path = "../a.go" }, "not a file this pull request changes", nil, nil},
		{"lines outside the diff's hunks", func(f *finderFinding) { f.StartLine, f.EndLine = 9, 11 }, "outside the pull request's diff", nil, nil},
		{"a file without a textual diff", func(f *finderFinding) { f.Path = "dir/b.go" }, "outside the pull request's diff", nil, nil},
		{"the old side", func(f *finderFinding) { f.Side = "LEFT" }, `side must be "RIGHT"`, nil, nil},
		{"an unknown severity", func(f *finderFinding) { f.Severity = "apocalyptic" }, "severity", nil, nil},
		{"a huge body is cut", func(f *finderFinding) { f.BodyMD = strings.Repeat("a", 10*maxBody) }, "", []string{strings.Repeat("a", maxBody+1)}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ff := base
			tt.edit(&ff)
			f, why := admit(ff, diff)
			if tt.refused != "" {
				if !strings.Contains(why, tt.refused) {
					t.Fatalf("refusal %q, want one saying %q", why, tt.refused)
				}
				return
			}
			if why != "" {
				t.Fatalf("refused: %s", why)
			}
			body := commentBody(f, true)
			for _, bad := range tt.absent {
				if strings.Contains(body, bad) {
					t.Errorf("the comment carries %q:\n%s", bad, body)
				}
			}
			for _, want := range tt.present {
				if !strings.Contains(body, want) {
					t.Errorf("the comment lacks %q:\n%s", want, body)
				}
			}
		})
	}
}

func TestDecodeAnswerTakesTheLastJSONBlockOrTheWholeAnswer(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, answer string
		wantErr      string
		want         int
	}{
		{"a bare object", `{"findings": [{"path": "a"}]}`, "", 1},
		{"the last block wins", "```json\n{\"findings\": []}\n```\nthen\n```json\n{\"findings\": [{}, {}]}\n```", "", 2},
		{"prose only", "I found nothing.", "not the JSON object asked for", 0},
		{"empty", "  ", "answered nothing", 0},
		{"two values", `{"findings": []} {"findings": []}`, "more than one JSON value", 0},
		{"a wrong type", `{"findings": {"path": "a"}}`, "not the JSON object asked for", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var out finderOutput
			err := decodeAnswer(tt.answer, &out)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || len(out.Findings) != tt.want {
				t.Fatalf("got %d findings, %v", len(out.Findings), err)
			}
		})
	}
}

func TestChangedLinesAreTheOldSidesRemovedAndReplacedLines(t *testing.T) {
	t.Parallel()
	patch := "@@ -10,4 +10,4 @@\n ctx\n-old\n+new\n ctx\n ctx"
	got := changedLines(patch)
	if !overlaps(got, 11, 11) || overlaps(got, 13, 14) || overlaps(got, 1, 9) {
		t.Fatalf("changed %v", got)
	}
	right, _ := hunks(patch)
	if len(right) != 1 || right[0] != (lineRange{10, 13}) {
		t.Fatalf("hunks %v", right)
	}
}
