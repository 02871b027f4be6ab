package reviews

import (
	"encoding/json"
	"fmt"
	"strings"
)

// filePatch is one changed file of the PR as the finder sees it.
type filePatch struct {
	Path, Status, Patch string
}

// maxPromptPatch bounds the patches a prompt quotes, so a huge PR's prompt stays under the
// task prompt limit; the finder reads the rest from its checkout.
const maxPromptPatch = 96 << 10

// FinderSchema is the JSON object a finder answers with; docs/reviews.md shows it.
const FinderSchema = `{"summary_md": "overview of the change, markdown",
 "findings": [{"path": "file changed by the PR", "start_line": 10, "end_line": 12, "side": "RIGHT",
   "category": "bug|security|performance|correctness|maintainability|style|test|docs",
   "severity": "critical|high|medium|low", "confidence": "high|medium|low",
   "title": "one line", "body_md": "why it is a problem, markdown",
   "suggested_fix": "replacement for lines start_line..end_line, or empty",
   "evidence": ["what in the code shows it"]}]}`

// VerifierSchema is the JSON object a verifier answers with.
const VerifierSchema = `{"verdicts": [{"finding_id": "f1", "verdict": "confirmed|rejected", "confidence": "high|medium|low", "reasoning": "why"}]}`

// The prompts' first lines are commands a scripted agent (the bash harness runs a prompt as a
// script) can answer by; an agent reads them as a title.
func finderPrompt(r *review, patches []filePatch) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Review pull request %s#%d at %s\n\n", r.Repo, r.PRNumber, r.HeadSHA)
	fmt.Fprintf(&b, "You are the finder of a code review. The pull request %q by %s merges %s into %s. %s"+
		"Find real problems the change introduces: bugs, security holes, data loss, races, wrong error handling. "+
		"Report only findings on lines the pull request changes (the hunks below), each on its file's new side (RIGHT). "+
		"Do not report style nits unless they hide a bug.\n\n",
		r.Title, r.Author, r.HeadBranch, r.BaseBranch, checkedOut(r))
	b.WriteString("Answer with one JSON object in a ```json block, exactly this shape (no other fields):\n\n")
	b.WriteString(FinderSchema + "\n\nChanged files:\n")
	budget := maxPromptPatch
	for _, p := range patches {
		fmt.Fprintf(&b, "\n=== %s (%s)\n", p.Path, p.Status)
		switch {
		case p.Patch == "":
			b.WriteString("(no textual diff)\n")
		case len(p.Patch) > budget:
			b.WriteString("(diff omitted: read the file in your checkout)\n")
		default:
			budget -= len(p.Patch)
			b.WriteString(p.Patch + "\n")
		}
	}
	return b.String()
}

func verifierPrompt(r *review) string {
	type brief struct {
		ID         string   `json:"id"`
		Path       string   `json:"path"`
		StartLine  int      `json:"start_line"`
		EndLine    int      `json:"end_line"`
		Severity   string   `json:"severity"`
		Title      string   `json:"title"`
		Body       string   `json:"body_md"`
		Evidence   []string `json:"evidence,omitempty"`
		Suggestion string   `json:"suggested_fix,omitempty"`
	}
	var list []brief
	for _, f := range r.Findings {
		list = append(list, brief{f.ID, f.Path, f.StartLine, f.EndLine, f.Severity, f.Title, f.BodyMD, f.Evidence, f.SuggestedFix})
	}
	findings, _ := json.MarshalIndent(list, "", "  ")
	var b strings.Builder
	fmt.Fprintf(&b, "Verify findings of review %s for %s#%d at %s\n\n", r.ID, r.Repo, r.PRNumber, r.HeadSHA)
	b.WriteString("You are the verifier of a code review: another agent proposed the findings below on the pull request's head. " + checkedOut(r) +
		"Judge each one against the code: confirm it only when it is a real problem the change introduces and the lines are right; " +
		"reject it when it is wrong, speculative, a duplicate or a nit. Unconfirmed findings are never posted.\n\n")
	b.WriteString("Answer with one JSON object in a ```json block, exactly this shape, one verdict per finding:\n\n")
	b.WriteString(VerifierSchema + "\n\nFindings:\n" + string(findings) + "\n")
	return b.String()
}

func fixPrompt(r *review, co *Checkout) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Fix review findings on %s#%d at %s\n\n", r.Repo, r.PRNumber, r.HeadSHA)
	fmt.Fprintf(&b, "Fix the confirmed review findings below on branch %s of %s, then commit and push the fix to that branch. "+
		"Change only what the findings need. %s\n\n", r.HeadBranch, r.Repo, checkedOut(r))
	if co != nil && co.Branch != "" {
		fmt.Fprintf(&b, "Your checkout is on the branch and can push it: commit there, then push with git push origin %s.\n\n", co.Branch)
	}
	for _, f := range r.Findings {
		if f.open() {
			fmt.Fprintf(&b, "- %s:%d-%d [%s] %s\n  %s\n", f.Path, f.StartLine, f.EndLine, f.Severity, f.Title, strings.ReplaceAll(f.BodyMD, "\n", "\n  "))
		}
	}
	return b.String()
}

// checkedOut tells an agent where the pull request's head is checked out: a sentence, or ""
// when GitHub named no repository to clone it from.
func checkedOut(r *review) string {
	if r.CheckoutURL == "" {
		return ""
	}
	_, name := splitRepo(r.Repo)
	return fmt.Sprintf("Its head %s is checked out at %s%s: read the code there. ", r.HeadSHA, checkoutRoot, name)
}
