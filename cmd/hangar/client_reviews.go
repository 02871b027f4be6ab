package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
)

func newReviewsCmd() *cobra.Command {
	return newClientGroup("reviews", "List, show and retry pull-request reviews", newReviewsListCmd, newReviewsGetCmd, newReviewsRetryCmd)
}

func newEnrollmentsCmd() *cobra.Command {
	return newClientGroup("enrollments", "List, set and delete the repositories enrolled for reviews", newEnrollmentsListCmd, newEnrollmentsSetCmd, newEnrollmentsDeleteCmd)
}

func stamp(ts *timestamppb.Timestamp) string {
	if ts == nil {
		return ""
	}
	return ts.AsTime().UTC().Format(time.RFC3339)
}

func newReviewsListCmd(f *clientFlags) *cobra.Command {
	req := &appv1.ListReviewsRequest{}
	cmd := clientCmd(f, "list [flags]", "List the active review of each pull request, newest first", cobra.NoArgs, func(c *apiClient, _ *cobra.Command, _ []string) error {
		return send(c, c.reviews.ListReviews, req, func(w io.Writer, resp *appv1.ListReviewsResponse) {
			table(w, []string{"ID", "PR", "STATUS", "FINDINGS", "AUTHOR", "TITLE", "CREATED"}, resp.GetReviews(), func(r *appv1.Review) []string {
				return []string{r.GetId(), fmt.Sprintf("%s#%d", r.GetRepo(), r.GetPrNumber()), r.GetStatus(), findingCounts(r.GetFindingCounts()),
					r.GetPrAuthor(), truncate(r.GetPrTitle(), 40), stamp(r.GetCreatedAt())}
			})
			fmt.Fprintf(w, "total: %d\n", resp.GetTotalCount())
		})
	})
	fl := cmd.Flags()
	fl.StringArrayVar(&req.Repos, "repo", nil, "only repository `OWNER/NAME` (repeatable)")
	fl.StringArrayVar(&req.Authors, "author", nil, "only pull requests by `LOGIN` (repeatable)")
	fl.StringArrayVar(&req.PrStates, "pr-state", nil, "only pull requests open, closed or merged (repeatable)")
	fl.StringArrayVar(&req.Statuses, "status", nil, "only reviews in status `S` (repeatable)")
	fl.StringArrayVar(&req.Severities, "severity", nil, "only reviews with open findings of severity `S` (repeatable)")
	fl.StringVar(&req.Search, "search", "", "only reviews whose title, repository, author, branch or #number has every word of `TEXT`")
	fl.Int32Var(&req.Page, "page", 0, "page `N` of the results")
	fl.Int32Var(&req.PageSize, "page-size", 0, "`N` reviews a page (default: the server's)")
	return cmd
}

func findingCounts(c *appv1.FindingCounts) string {
	if c.GetTotal() == 0 {
		return "0"
	}
	return fmt.Sprintf("%d (c%d h%d m%d l%d)", c.GetTotal(), c.GetCritical(), c.GetHigh(), c.GetMedium(), c.GetLow())
}

func newReviewsGetCmd(f *clientFlags) *cobra.Command {
	return idCmd(f, "get ID", "Show a review pass with its findings, verdicts, passes and events", func(c *apiClient, _ *cobra.Command, id string) error {
		return send(c, c.reviews.GetReview, &appv1.GetReviewRequest{Id: id}, func(w io.Writer, resp *appv1.GetReviewResponse) {
			record(w, resp.GetReview())
			fmt.Fprintln(w, "\nfindings:")
			table(w, []string{"ID", "STATE", "SEVERITY", "WHERE", "TITLE", "THREAD"}, resp.GetFindings(), func(x *appv1.ReviewFinding) []string {
				return []string{x.GetId(), x.GetState(), x.GetSeverity(), fmt.Sprintf("%s:%d-%d", x.GetPath(), x.GetStartLine(), x.GetEndLine()), truncate(x.GetTitle(), 50), x.GetScmThreadId()}
			})
			fmt.Fprintln(w, "\npasses:")
			table(w, []string{"ID", "STATUS", "ACTIVE", "HEAD", "TRIGGER", "CREATED"}, resp.GetPasses(), func(p *appv1.Review) []string {
				return []string{p.GetId(), p.GetStatus(), yesNo(p.GetActive()), truncate(p.GetHeadSha(), 12), p.GetTrigger(), stamp(p.GetCreatedAt())}
			})
			fmt.Fprintln(w, "\nevents:")
			table(w, []string{"AT", "KIND", "DETAIL"}, resp.GetEvents(), func(e *appv1.ReviewEvent) []string {
				return []string{stamp(e.GetCreatedAt()), e.GetKind(), truncate(e.GetDetail(), 100)}
			})
		})
	})
}

func newReviewsRetryCmd(f *clientFlags) *cobra.Command {
	return idCmd(f, "retry ID", "Review the pull request again at its current head, as a new pass (admins)", func(c *apiClient, _ *cobra.Command, id string) error {
		return send(c, c.reviews.RetryReview, &appv1.RetryReviewRequest{Id: id}, func(w io.Writer, resp *appv1.RetryReviewResponse) {
			fmt.Fprintf(w, "Started pass %s (workflow %s).\n", resp.GetReviewId(), resp.GetWorkflowId())
		})
	})
}

func newEnrollmentsListCmd(f *clientFlags) *cobra.Command {
	return clientCmd(f, "list", "List the repositories enrolled for reviews", cobra.NoArgs, func(c *apiClient, _ *cobra.Command, _ []string) error {
		return send(c, c.reviews.ListEnrollments, &emptypb.Empty{}, func(w io.Writer, resp *appv1.ListEnrollmentsResponse) {
			table(w, []string{"REPO", "TRIGGER", "AUTOFIX", "PROFILE", "ENGINE", "UPDATED"}, resp.GetEnrollments(), func(e *appv1.RepoEnrollment) []string {
				return []string{e.GetRepo(), e.GetTriggerMode(), e.GetAutofix(), e.GetProfileId(), e.GetEngine(), stamp(e.GetUpdatedAt())}
			})
		})
	})
}

func newEnrollmentsSetCmd(f *clientFlags) *cobra.Command {
	req := &appv1.UpsertEnrollmentRequest{}
	cmd := clientCmd(f, "set OWNER/NAME --profile ID [--trigger automatic|on_request|manual] [--autofix off|suggest|task] [--engine HARNESS]",
		"Enroll a repository for reviews or change its enrollment (admins)", cobra.ExactArgs(1), func(c *apiClient, cmd *cobra.Command, args []string) error {
			if err := checkOneOf(cmd, "trigger", "automatic", "on_request", "manual"); err != nil {
				return err
			}
			if err := checkOneOf(cmd, "autofix", "off", "suggest", "task"); err != nil {
				return err
			}
			req.Repo, req.ProfileId, req.Engine = args[0], optString(cmd, "profile"), optString(cmd, "engine")
			return send(c, c.reviews.UpsertEnrollment, req, nil)
		})
	fl := cmd.Flags()
	fl.String("profile", "", "the profile `ID` the agents run with: image, repositories, harness (required)")
	fl.StringVar(&req.TriggerMode, "trigger", "", "automatic (on open and each push), on_request (a /hangar review comment) or manual (default automatic)")
	fl.StringVar(&req.Autofix, "autofix", "", "off, suggest (suggestion blocks) or task (a fix task pushes to the branch) (default off)")
	fl.String("engine", "", "the `HARNESS` the agents use (default: the profile's)")
	_ = cmd.MarkFlagRequired("profile")
	return cmd
}

func newEnrollmentsDeleteCmd(f *clientFlags) *cobra.Command {
	return idCmd(f, "delete OWNER/NAME", "Unenroll a repository (admins); its reviews stay", func(c *apiClient, _ *cobra.Command, repo string) error {
		return send(c, c.reviews.DeleteEnrollment, &appv1.DeleteEnrollmentRequest{Repo: repo}, func(w io.Writer, _ *emptypb.Empty) {
			fmt.Fprintf(w, "Unenrolled %s.\n", repo)
		})
	})
}
