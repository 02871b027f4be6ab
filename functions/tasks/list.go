package tasks

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"

	"cloud.google.com/go/firestore"
	"connectrpc.com/connect"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/platform/apierr"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/config"
	"github.com/hangar-dev/hangar/platform/paging"
	"github.com/hangar-dev/hangar/platform/store"
)

// sortOrder is a field tasks are listed by and its direction; ties break by id, in the same
// direction, so that pages are stable.
type sortOrder struct {
	field string
	dir   firestore.Direction
}

// orders are the values of ListTasks' order; "" is newest first.
var orders = map[string]sortOrder{
	"":        {"created_at", firestore.Desc},
	"newest":  {"created_at", firestore.Desc},
	"oldest":  {"created_at", firestore.Asc},
	"updated": {"updated_at", firestore.Desc},
}

const (
	// maxFilterUsers and maxDisjunctions are Firestore's bounds: an "in" filter takes at most
	// 30 values, and a query at most 30 combinations of its "in" filters' values.
	maxFilterUsers  = 30
	maxDisjunctions = 30
	maxFilterStates = 10
)

// listing is a validated ListTasks request.
type listing struct {
	// owners are the users whose tasks are listed; nil means everyone's.
	owners []string
	states []string
	// terms are search index keys that must all be present.
	terms []string
	order sortOrder
	page  paging.Page
}

// ListTasks lists the caller's tasks (an admin's scope "all": everyone's), filtered, searched,
// ordered and paged, with the total count of the filtered set.
func (s *Service) ListTasks(ctx context.Context, req *connect.Request[appv1.ListTasksRequest]) (*connect.Response[appv1.ListTasksResponse], error) {
	caller, _ := auth.Caller(ctx)
	l, reachable, err := parseList(caller, req.Msg, s.lim)
	if err != nil || !reachable {
		return connect.NewResponse(&appv1.ListTasksResponse{}), err
	}
	filtered := s.filter(l)
	var recs []record
	var total int64
	var listErr, countErr error
	var wg sync.WaitGroup
	wg.Go(func() { recs, listErr = s.query(ctx, l.pageOf(filtered)) })
	wg.Go(func() { total, countErr = store.Count(ctx, filtered, nil) })
	wg.Wait()
	if err := errors.Join(listErr, countErr); err != nil {
		return nil, fmt.Errorf("list tasks: %w", err)
	}
	out, unavailable, err := s.protosFollowing(ctx, recs)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&appv1.ListTasksResponse{
		Tasks: out, TotalCount: int32(min(total, math.MaxInt32)), SessionStateUnavailable: unavailable,
	}), nil
}

// parseList validates a ListTasks request, reporting every bad field at once, and says whether
// it can match any task: a non-admin filtering on other users only cannot.
func parseList(caller auth.Principal, m *appv1.ListTasksRequest, lim config.Limits) (listing, bool, error) {
	var v apierr.Violations
	var l listing
	users := distinct(&v, "created_by_user_ids", m.GetCreatedByUserIds(), maxFilterUsers, nil)
	l.states = distinct(&v, "states", m.GetStates(), maxFilterStates, func(s string) string {
		if isState(s) {
			return ""
		}
		return "must be one of " + strings.Join(States(), ", ")
	})
	scope := m.GetScope()
	if !slices.Contains([]string{"", "mine", "all"}, scope) {
		v.Add("scope", `must be "mine" (the default) or "all"`)
	}
	var reachable bool
	l.owners, reachable = owners(caller, scope == "all", users)
	if len(l.owners) > 1 && len(l.owners)*max(len(l.states), 1) > maxDisjunctions {
		v.Addf("created_by_user_ids", "times the number of states must be at most %d (is %d × %d)", maxDisjunctions, len(l.owners), len(l.states))
	}
	l.terms = searchTerms(m.GetSearch())
	if len(l.terms) > maxSearchWords {
		v.Addf("search", "must have at most %d words (has %d)", maxSearchWords, len(l.terms))
	}
	order, ok := orders[m.GetOrder()]
	switch {
	case !ok:
		v.Add("order", `must be "newest" (the default), "oldest" or "updated"`)
	case len(l.terms) > 0 && order.field == "updated_at":
		v.Add("order", `cannot be "updated" with a search: search results are ordered by creation`)
	case len(l.terms) > 0:
		// Why by id: Firestore answers equality filters on map keys from its automatic
		// single-field indexes only in document order, and a composite index with created_at
		// cannot be declared for keys that are not known in advance. Ids are ULIDs, which sort
		// by creation time.
		order.field = firestore.DocumentID
	}
	l.order = order
	if err := v.Err(); err != nil {
		return listing{}, false, err
	}
	page, err := paging.FromPage(m.GetPage(), m.GetPageSize(), lim.Tasks)
	if err != nil {
		return listing{}, false, err
	}
	if page.Offset >= lim.TaskListOffset {
		return listing{}, false, apierr.InvalidArgument("page", fmt.Sprintf("pages past the first %d tasks are not served; narrow the filters or search instead", lim.TaskListOffset))
	}
	l.page = page
	return l, reachable, nil
}

// owners says whose tasks a listing covers, nil meaning everyone's, and whether that leaves any
// task the caller may see: a non-admin lists only their own, whatever the scope.
func owners(caller auth.Principal, all bool, requested []string) ([]string, bool) {
	switch {
	case all && caller.Admin:
		return requested, true
	case len(requested) > 0 && !slices.Contains(requested, caller.UserID):
		return nil, false
	}
	return []string{caller.UserID}, true
}

// distinct validates a list filter: at most limit items, each non-empty and, when check is not
// nil, accepted by it (check returns why not, or ""); it returns the items without repeats.
func distinct(v *apierr.Violations, field string, items []string, limit int, check func(string) string) []string {
	if len(items) > limit {
		v.Addf(field, "must have at most %d items (has %d)", limit, len(items))
		return nil
	}
	var out []string
	for i, it := range items {
		why := ""
		switch {
		case it == "":
			why = "must not be empty"
		case check != nil:
			why = check(it)
		}
		switch {
		case why != "":
			v.Add(fmt.Sprintf("%s[%d]", field, i), why)
		case !slices.Contains(out, it):
			out = append(out, it)
		}
	}
	return out
}

// filter is the query for every task a listing covers, unordered: the page and the count both
// start from it.
func (s *Service) filter(l listing) firestore.Query {
	q := s.col().Query
	if l.owners != nil {
		q = q.Where("created_by_user_id", "in", l.owners)
	}
	if l.states != nil {
		q = q.Where("status", "in", l.states)
	}
	for _, t := range l.terms {
		q = q.WherePath(firestore.FieldPath{"search", t}, "==", true)
	}
	return q
}

// pageOf orders q and cuts the listing's page from it.
func (l listing) pageOf(q firestore.Query) firestore.Query {
	q = q.Select(projected...).OrderBy(l.order.field, l.order.dir)
	if l.order.field != firestore.DocumentID {
		q = q.OrderBy(firestore.DocumentID, l.order.dir)
	}
	return q.Offset(l.page.Offset).Limit(l.page.Size)
}
