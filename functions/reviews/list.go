package reviews

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"cloud.google.com/go/firestore"
	"connectrpc.com/connect"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/platform/apierr"
	"github.com/hangar-dev/hangar/platform/paging"
	"github.com/hangar-dev/hangar/platform/store"
)

// listed names every stored field of a review but its findings, events and diff, which lists
// do not show: reads leave them behind.
var listed = func() []string {
	t := reflect.TypeFor[review]()
	var out []string
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("firestore"), ",")
		if !slices.Contains([]string{"findings", "events", "diff"}, name) {
			out = append(out, name)
		}
	}
	return out
}()

// reviewFilter is a validated ListReviews request.
type reviewFilter struct {
	repos, authors, prStates, statuses, severities []string
	terms                                          []string
}

func parseFilter(m *appv1.ListReviewsRequest) (reviewFilter, error) {
	var v apierr.Violations
	list := func(field string, items []string, check func(string) string) []string {
		if len(items) > maxFilterItems {
			v.Addf(field, "must have at most %d items (has %d)", maxFilterItems, len(items))
			return nil
		}
		var out []string
		for i, it := range items {
			why := ""
			if it = strings.TrimSpace(it); it == "" {
				why = "must not be empty"
			} else if check != nil {
				why = check(it)
			}
			if why != "" {
				v.Add(fmt.Sprintf("%s[%d]", field, i), why)
			} else if !slices.Contains(out, it) {
				out = append(out, it)
			}
		}
		return out
	}
	f := reviewFilter{
		repos:      list("repos", m.GetRepos(), nil),
		authors:    list("authors", m.GetAuthors(), nil),
		prStates:   list("pr_states", m.GetPrStates(), oneOf([]string{"open", "closed", "merged"})),
		statuses:   list("statuses", m.GetStatuses(), oneOf(States())),
		severities: list("severities", m.GetSeverities(), oneOf(severities)),
	}
	f.terms = strings.Fields(strings.ToLower(m.GetSearch()))
	if len(f.terms) > 10 {
		v.Addf("search", "must have at most 10 words (has %d)", len(f.terms))
	}
	return f, v.Err()
}

func oneOf(values []string) func(string) string {
	return func(s string) string {
		if slices.Contains(values, s) {
			return ""
		}
		return "must be one of " + strings.Join(values, ", ")
	}
}

func anyFold(list []string, s string) bool {
	return len(list) == 0 || slices.ContainsFunc(list, func(x string) bool { return strings.EqualFold(x, s) })
}

// matches reports whether r passes every filter: each list matches any of its values, search
// matches when every word is in the title, repository, author, branch or PR number.
func (f reviewFilter) matches(r *review) bool {
	if !anyFold(f.repos, r.Repo) || !anyFold(f.authors, r.Author) || !anyFold(f.prStates, r.PRState) || !anyFold(f.statuses, r.Status) {
		return false
	}
	if len(f.severities) > 0 && !slices.ContainsFunc(f.severities, func(s string) bool { return slices.Contains(r.Severities, s) }) {
		return false
	}
	hay := strings.ToLower(strings.Join([]string{r.Title, r.Repo, r.Author, r.HeadBranch, fmt.Sprintf("#%d", r.PRNumber)}, " "))
	for _, t := range f.terms {
		if !strings.Contains(hay, t) {
			return false
		}
	}
	return true
}

// ListReviews lists the active pass of each reviewed PR, newest first, filtered and paged, with
// the total count of the filtered set and the facets (the distinct repositories, authors, PR
// states and statuses) of all of them.
//
// Why in memory: six multi-valued filters and a substring search are more than Firestore's
// one-"in"-per-query and single array-contains allow, and facets need every row anyway. The
// scan reads the newest Limits.ListScan active passes with the list projection (no findings or
// events); older ones are not listed, which docs/reviews.md says.
func (s *Service) ListReviews(ctx context.Context, req *connect.Request[appv1.ListReviewsRequest]) (*connect.Response[appv1.ListReviewsResponse], error) {
	f, err := parseFilter(req.Msg)
	if err != nil {
		return nil, err
	}
	page, err := paging.FromPage(req.Msg.GetPage(), req.Msg.GetPageSize(), s.d.Limits.Page)
	if err != nil {
		return nil, err
	}
	recs, err := store.All[review](s.d.DB.Collection(reviewsCol).Where("active", "==", true).
		OrderBy("created_at", firestore.Desc).Limit(s.d.Limits.ListScan).Select(listed...).Documents(ctx))
	if err != nil {
		return nil, fmt.Errorf("list reviews: %w", err)
	}
	facets := &appv1.ReviewFacets{}
	var hits []*review
	for i := range recs {
		r := &recs[i]
		addFacet(&facets.Repos, r.Repo)
		addFacet(&facets.Authors, r.Author)
		addFacet(&facets.PrStates, r.PRState)
		addFacet(&facets.Statuses, r.Status)
		if f.matches(r) {
			hits = append(hits, r)
		}
	}
	for _, l := range [][]string{facets.Repos, facets.Authors, facets.PrStates, facets.Statuses} {
		slices.Sort(l)
	}
	out := &appv1.ListReviewsResponse{TotalCount: int32(len(hits)), Facets: facets}
	for i := page.Offset; i < len(hits) && i < page.Offset+page.Size; i++ {
		out.Reviews = append(out.Reviews, hits[i].proto())
	}
	return connect.NewResponse(out), nil
}

func addFacet(l *[]string, v string) {
	if v != "" && !slices.Contains(*l, v) {
		*l = append(*l, v)
	}
}
