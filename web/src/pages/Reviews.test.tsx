import { create } from "@bufbuild/protobuf";
import { fireEvent, screen, waitFor, within } from "@testing-library/react";

import { ReviewFindingSchema, ReviewSchema, ReviewService, type ListReviewsRequest } from "../gen/svc/app/v1/review_pb";
import { renderApp } from "../testing";

const review = create(ReviewSchema, {
  id: "rev_1",
  repo: "acme/api",
  prNumber: 7,
  prTitle: "Add login",
  status: "posted",
  headSha: "abcdef1234567",
  baseSha: "1234567abcdef",
  findingCounts: { high: 1, low: 1, total: 2 },
});

describe("reviews", () => {
  it("sends the facets chosen in the URL and adds one when checked", async () => {
    const seen: ListReviewsRequest[] = [];
    renderApp("/reviews?repo=acme/api&severity=high&page=2", (r) =>
      r.service(ReviewService, {
        listReviews(req) {
          seen.push(req);
          return { reviews: [review], totalCount: 51, facets: { repos: ["acme/api", "acme/web"], authors: ["ada"], prStates: ["open"], statuses: ["posted"] } };
        },
      }),
    );
    const link = await screen.findByRole("link", { name: "acme/api#7 Add login" });
    expect(link.getAttribute("href")).toBe("/reviews/rev_1");
    expect(seen[0]).toMatchObject({ repos: ["acme/api"], severities: ["high"], page: 2, pageSize: 50 });
    fireEvent.click(screen.getByRole("checkbox", { name: "ada" }));
    await waitFor(() => expect(seen.at(-1)).toMatchObject({ repos: ["acme/api"], authors: ["ada"], page: 1 }));
  });

  it("groups a review's findings by severity, each with its verdict", async () => {
    renderApp("/reviews/rev_1", (r) =>
      r.service(ReviewService, {
        getReview: () => ({
          review,
          findings: [
            create(ReviewFindingSchema, { id: "f1", path: "auth.go", startLine: 10, severity: "low", title: "Typo", category: "style", confidence: "high", state: "posted" }),
            create(ReviewFindingSchema, { id: "f2", path: "auth.go", startLine: 3, endLine: 5, severity: "high", title: "Token logged", category: "security", confidence: "high", state: "posted" }),
          ],
          verdicts: [{ findingId: "f2", verdict: "confirmed", reasoning: "the log line prints it" }],
          passes: [review],
          events: [{ id: "e1", kind: "posted" }],
        }),
      }),
    );
    const high = await screen.findByRole("region", { name: "high findings" });
    expect(high.textContent).toContain("Token logged");
    expect(high.textContent).toContain("auth.go:3-5");
    expect(high.textContent).toContain("Verdict: confirmed — the log line prints it");
    const low = screen.getByRole("region", { name: "low findings" });
    expect(within(low).getByText("Typo")).toBeTruthy();
    expect(screen.queryByRole("region", { name: "critical findings" })).toBeNull();
    expect(screen.getByRole("region", { name: "Events" }).textContent).toContain("posted");
  });
});
