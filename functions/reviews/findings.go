package reviews

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// finderOutput is what a finder answers: one JSON object (docs/reviews.md documents the schema),
// alone or as the last ```json block of its answer.
type finderOutput struct {
	Findings []finderFinding `json:"findings"`
	// Summary is the finder's overview of the change, the start of the posted summary.
	Summary string `json:"summary_md"`
}

type finderFinding struct {
	Path         string   `json:"path"`
	StartLine    int      `json:"start_line"`
	EndLine      int      `json:"end_line"`
	Side         string   `json:"side"`
	Category     string   `json:"category"`
	Severity     string   `json:"severity"`
	Confidence   string   `json:"confidence"`
	Title        string   `json:"title"`
	BodyMD       string   `json:"body_md"`
	SuggestedFix string   `json:"suggested_fix"`
	Evidence     []string `json:"evidence"`
}

// verifierOutput is what a verifier answers: a verdict per finding id.
type verifierOutput struct {
	Verdicts []struct {
		FindingID  string `json:"finding_id"`
		Verdict    string `json:"verdict"`
		Confidence string `json:"confidence"`
		Reasoning  string `json:"reasoning"`
	} `json:"verdicts"`
}

const (
	VerdictConfirmed = "confirmed"
	VerdictRejected  = "rejected"
)

var (
	confidences = []string{"high", "medium", "low"}
	categories  = []string{"bug", "security", "performance", "correctness", "maintainability", "style", "test", "docs"}
	// jsonBlock is a fenced JSON block of an agent's answer.
	jsonBlock = regexp.MustCompile("(?s)```json[ \t]*\r?\n(.*?)\r?\n[ \t]*```")
)

// Bounds of what an agent's answer may put in a finding, in bytes.
const (
	maxTitle    = 200
	maxBody     = 4000
	maxFix      = 4000
	maxEvidence = 10
	maxReason   = 2000
)

// decodeAnswer reads the JSON object an agent answered into v: the last ```json block of its
// output, or else the whole output. Unknown fields are refused, so a misnamed field is an
// error the events show rather than a finding silently missing a part.
func decodeAnswer(output string, v any) error {
	text := strings.TrimSpace(output)
	if m := jsonBlock.FindAllStringSubmatch(output, -1); len(m) > 0 {
		text = m[len(m)-1][1]
	}
	if text == "" {
		return errors.New("the agent answered nothing")
	}
	dec := json.NewDecoder(strings.NewReader(text))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("the agent's answer is not the JSON object asked for: %w", err)
	}
	if dec.More() {
		return errors.New("the agent's answer has more than one JSON value")
	}
	return nil
}

// admit checks a finder's finding against the PR's diff and the schema, and makes it safe to
// post: it answers the finding, or why it is refused.
func admit(ff finderFinding, diff map[string][]lineRange) (finding, string) {
	f := finding{
		Path: strings.TrimPrefix(ff.Path, "./"), StartLine: ff.StartLine, EndLine: ff.EndLine, Side: strings.ToUpper(ff.Side),
		Category: strings.ToLower(ff.Category), Severity: strings.ToLower(ff.Severity), Confidence: strings.ToLower(ff.Confidence),
	}
	if f.Side == "" {
		f.Side = "RIGHT"
	}
	if f.EndLine == 0 {
		f.EndLine = f.StartLine
	}
	if f.StartLine == 0 {
		f.StartLine = f.EndLine
	}
	switch {
	case f.Path == "":
		return f, "it names no path"
	case diff[f.Path] == nil:
		return f, fmt.Sprintf("%q is not a file this pull request changes", truncate(f.Path, 200))
	case f.Side != "RIGHT":
		return f, `side must be "RIGHT": findings are on the pull request's head`
	case f.StartLine < 1 || f.EndLine < f.StartLine:
		return f, fmt.Sprintf("lines %d-%d are not a range", f.StartLine, f.EndLine)
	case !inDiff(diff[f.Path], f.StartLine, f.EndLine):
		return f, fmt.Sprintf("lines %d-%d of %s are outside the pull request's diff", f.StartLine, f.EndLine, f.Path)
	case !slices.Contains(severities, f.Severity):
		return f, fmt.Sprintf("severity %q is not one of %s", truncate(f.Severity, 50), strings.Join(severities, ", "))
	case !slices.Contains(confidences, f.Confidence):
		return f, fmt.Sprintf("confidence %q is not one of %s", truncate(f.Confidence, 50), strings.Join(confidences, ", "))
	case strings.TrimSpace(ff.Title) == "":
		return f, "it has no title"
	}
	if !slices.Contains(categories, f.Category) {
		f.Category = "correctness"
	}
	f.Title = neutralize(truncate(oneLine(ff.Title), maxTitle))
	f.BodyMD = neutralize(truncate(ff.BodyMD, maxBody))
	f.SuggestedFix = truncate(ff.SuggestedFix, maxFix)
	for i, e := range ff.Evidence {
		if i == maxEvidence {
			break
		}
		f.Evidence = append(f.Evidence, neutralize(truncate(e, maxTitle*2)))
	}
	return f, ""
}

// inDiff reports whether lines start-end all lie in one hunk of the diff: GitHub takes inline
// comments only there.
func inDiff(ranges []lineRange, start, end int) bool {
	return slices.ContainsFunc(ranges, func(r lineRange) bool { return start >= r.Start && end <= r.End })
}

// hunkHeader is a unified diff hunk's header: @@ -a,b +c,d @@.
var hunkHeader = regexp.MustCompile(`(?m)^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@`)

// hunks are a patch's hunks: their line ranges on the new side (RIGHT) and on the old (LEFT).
func hunks(patch string) (right, left []lineRange) {
	for _, m := range hunkHeader.FindAllStringSubmatch(patch, -1) {
		oldStart, _ := strconv.Atoi(m[1])
		oldLen := 1
		if m[2] != "" {
			oldLen, _ = strconv.Atoi(m[2])
		}
		newStart, _ := strconv.Atoi(m[3])
		newLen := 1
		if m[4] != "" {
			newLen, _ = strconv.Atoi(m[4])
		}
		if newLen > 0 {
			right = append(right, lineRange{newStart, newStart + newLen - 1})
		}
		if oldLen > 0 {
			left = append(left, lineRange{oldStart, oldStart + oldLen - 1})
		} else {
			// A pure insertion after line oldStart touches the lines around it.
			left = append(left, lineRange{oldStart, oldStart + 1})
		}
	}
	return right, left
}

// changedLines are the lines of the old side a patch changes: removed or replaced lines, and
// for insertions the line they follow. Context lines are not changes.
func changedLines(patch string) []lineRange {
	var out []lineRange
	oldLine := 0
	for _, line := range strings.Split(patch, "\n") {
		if m := hunkHeader.FindStringSubmatch(line); m != nil {
			oldLine, _ = strconv.Atoi(m[1])
			continue
		}
		switch {
		case strings.HasPrefix(line, "-"):
			out = append(out, lineRange{oldLine, oldLine})
			oldLine++
		case strings.HasPrefix(line, "+"):
			out = append(out, lineRange{max(oldLine-1, 1), oldLine})
		case strings.HasPrefix(line, `\`):
		default:
			oldLine++
		}
	}
	return out
}

func overlaps(ranges []lineRange, start, end int) bool {
	return slices.ContainsFunc(ranges, func(r lineRange) bool { return start <= r.End && end >= r.Start })
}

// mention is an @-mention GitHub would notify: @user or @org/team after a non-word character.
var mention = regexp.MustCompile(`(^|[^A-Za-z0-9_` + "`" + `])@([A-Za-z0-9])`)

// neutralize makes agent text inert on GitHub: an @-mention gets a zero-width joiner after its
// @ (it still reads the same but notifies nobody), and '<' and '>' become entities, so no HTML
// (images that call home, details blocks hiding text, comments hiding instructions) renders.
// Markdown stays: it is what a review is written in.
func neutralize(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.NewReplacer("<", "&lt;", ">", "&gt;").Replace(s)
	return mention.ReplaceAllString(s, "$1@\u200d$2")
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// fence is a code fence longer than any run of backticks in s, so s cannot close it.
func fence(s string) string {
	longest, run := 0, 0
	for _, r := range s {
		if r == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	return strings.Repeat("`", max(3, longest+1))
}

// commentBody is a confirmed finding's inline comment: its title, severity and body, with its
// fix as a suggestion block GitHub can apply when autofix is suggest.
func commentBody(f finding, suggest bool) string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "**%s** · %s · %s\n\n%s", f.Title, f.Severity, f.Category, f.BodyMD)
	if suggest && f.SuggestedFix != "" {
		fix := strings.TrimSuffix(f.SuggestedFix, "\n")
		fc := fence(fix)
		fmt.Fprintf(&b, "\n\n%ssuggestion\n%s\n%s", fc, fix, fc)
	}
	return b.String()
}

// postMarker tags the posted review with its pass: finding it on the PR is how a retried
// posting step knows it already posted.
func postMarker(reviewID string, pass int) string {
	return fmt.Sprintf("<!-- hangar-review:%s:%d -->", reviewID, pass)
}
