package main

import (
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
)

func TestReviewsListGetRetry(t *testing.T) {
	f := newFakeAPI(t)
	rv := &appv1.Review{Id: "rvw_1", Repo: "acme/widgets", PrNumber: 7, Status: "completed", PrAuthor: proto.String("octocat"),
		PrTitle: proto.String("Add cache"), FindingCounts: &appv1.FindingCounts{High: 1, Total: 1}, Active: true, HeadSha: "abc"}
	reply(f, appv1connect.ReviewServiceListReviewsProcedure, &appv1.ListReviewsResponse{Reviews: []*appv1.Review{rv}, TotalCount: 1})
	out := f.mustRun(t, "reviews", "list", "--repo", "acme/widgets", "--severity", "high", "--status", "completed", "--search", "cache", "--page-size", "5")
	f.assertRequest(t, appv1connect.ReviewServiceListReviewsProcedure, &appv1.ListReviewsRequest{
		Repos: []string{"acme/widgets"}, Severities: []string{"high"}, Statuses: []string{"completed"}, Search: "cache", PageSize: 5,
	})
	assertContains(t, squash(out), "rvw_1 acme/widgets#7 completed 1 (c0 h1 m0 l0) octocat Add cache", "total: 1")

	reply(f, appv1connect.ReviewServiceGetReviewProcedure, &appv1.GetReviewResponse{Review: rv, Passes: []*appv1.Review{rv},
		Findings: []*appv1.ReviewFinding{{Id: "f1", State: "posted", Severity: "high", Path: "a.go", StartLine: proto.Int32(11), EndLine: proto.Int32(12), Title: "Nil map", ScmThreadId: proto.String("1001")}},
		Events:   []*appv1.ReviewEvent{{Kind: "posted", Detail: proto.String("review 1000")}}})
	out = f.mustRun(t, "reviews", "get", "rvw_1")
	assertContains(t, squash(out), "f1 posted high a.go:11-12 Nil map 1001", "posted review 1000")

	reply(f, appv1connect.ReviewServiceRetryReviewProcedure, &appv1.RetryReviewResponse{WorkflowId: "rvw_2", ReviewId: proto.String("rvw_2")})
	out = f.mustRun(t, "reviews", "retry", "rvw_1")
	f.assertRequest(t, appv1connect.ReviewServiceRetryReviewProcedure, &appv1.RetryReviewRequest{Id: "rvw_1"})
	assertContains(t, out, "Started pass rvw_2 (workflow rvw_2).")
}

func TestEnrollmentsListSetDelete(t *testing.T) {
	f := newFakeAPI(t)
	e := &appv1.RepoEnrollment{Repo: "acme/widgets", TriggerMode: "on_request", Autofix: "suggest", ProfileId: proto.String("prof_1"), Engine: "bash"}
	reply(f, appv1connect.ReviewServiceUpsertEnrollmentProcedure, &appv1.UpsertEnrollmentResponse{Enrollment: e})
	out := f.mustRun(t, "enrollments", "set", "acme/widgets", "--profile", "prof_1", "--trigger", "on_request", "--autofix", "suggest", "--engine", "bash")
	f.assertRequest(t, appv1connect.ReviewServiceUpsertEnrollmentProcedure, &appv1.UpsertEnrollmentRequest{
		Repo: "acme/widgets", ProfileId: proto.String("prof_1"), TriggerMode: "on_request", Autofix: "suggest", Engine: proto.String("bash"),
	})
	assertContains(t, out, "repo: acme/widgets")

	reply(f, appv1connect.ReviewServiceListEnrollmentsProcedure, &appv1.ListEnrollmentsResponse{Enrollments: []*appv1.RepoEnrollment{e}})
	assertContains(t, squash(f.mustRun(t, "enrollments", "list")), "acme/widgets on_request suggest prof_1 bash")

	reply(f, appv1connect.ReviewServiceDeleteEnrollmentProcedure, &emptypb.Empty{})
	assertContains(t, f.mustRun(t, "enrollments", "delete", "acme/widgets"), "Unenrolled acme/widgets.")

	for _, args := range [][]string{
		{"enrollments", "set", "acme/widgets"},                                       // no --profile
		{"enrollments", "set", "acme/widgets", "--profile", "p", "--trigger", "now"}, // unknown trigger
		{"enrollments", "set", "acme/widgets", "--profile", "p", "--autofix", "yes"},
	} {
		if r := f.run(t, args...); r.code != exitInvalidArgument {
			t.Errorf("%v: exit %d (%v), want %d", args, r.code, r.err, exitInvalidArgument)
		}
	}
}
