// Package fsindex decides which composite index a Firestore query needs and whether
// firestore.indexes.json (the file `gcloud firestore indexes` and the Firebase CLI deploy) has
// it. The emulator serves every query without indexes; production refuses one that lacks its
// composite index (FAILED_PRECONDITION, "The query requires an index"), so tests record the
// queries the code runs (store.RecordQueries) and check them here.
//
// The rule applied, from Firestore's index documentation:
//
//   - Every field has single-field indexes (ascending, descending, array-contains) unless
//     exempted, and Firestore merges them for equality filters: a query whose filters are all
//     equalities (==, in, is null) and that orders by nothing but the document name needs no
//     composite index, whatever the number of fields.
//   - A query on one field only (a filter, a range, an order, array-contains) needs none.
//   - Anything else needs a composite index: the equality fields (any order), then an
//     array-contains field, then the ordered fields — the explicit orders, then each inequality
//     field not ordered explicitly, ascending — each in its direction. An order on a field
//     that also has an equality filter is dropped; the document name is implicit in every
//     index and is ignored.
//
// An index in the file serves a query when it has the same collection group and scope, the
// same set of equality fields first, then the same array-contains field, then exactly the
// ordered fields in the same directions.
package fsindex

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"

	"cloud.google.com/go/firestore/apiv1/firestorepb"
)

// File is firestore.indexes.json.
type File struct {
	Indexes        []Index           `json:"indexes"`
	FieldOverrides []json.RawMessage `json:"fieldOverrides"`
}

// Index is one composite index as firestore.indexes.json spells it.
type Index struct {
	CollectionGroup string  `json:"collectionGroup"`
	QueryScope      string  `json:"queryScope"`
	Fields          []Field `json:"fields"`
}

// Field is one field of an index: ordered (Order) or array-contains (ArrayConfig CONTAINS).
type Field struct {
	FieldPath   string `json:"fieldPath"`
	Order       string `json:"order,omitempty"`
	ArrayConfig string `json:"arrayConfig,omitempty"`
}

// Query is what of a query decides its index.
type Query struct {
	CollectionGroup string
	Scope           string   // COLLECTION, or COLLECTION_GROUP for a query of all descendants
	Equalities      []string // sorted
	ArrayContains   string
	Ordered         []Field // in index order, with their directions
}

// Read reads a firestore.indexes.json.
func Read(path string) (File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return File{}, err
	}
	var f File
	if err := json.Unmarshal(b, &f); err != nil {
		return File{}, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}

// Shape reduces q to what decides its index.
func Shape(q *firestorepb.StructuredQuery) Query {
	var s Query
	if from := q.GetFrom(); len(from) > 0 {
		s.CollectionGroup, s.Scope = from[0].GetCollectionId(), "COLLECTION"
		if from[0].GetAllDescendants() {
			s.Scope = "COLLECTION_GROUP"
		}
	}
	eq := map[string]bool{}
	var inequalities []string
	var walk func(f *firestorepb.StructuredQuery_Filter)
	walk = func(f *firestorepb.StructuredQuery_Filter) {
		switch ft := f.GetFilterType().(type) {
		case *firestorepb.StructuredQuery_Filter_CompositeFilter:
			for _, sub := range ft.CompositeFilter.GetFilters() {
				walk(sub)
			}
		case *firestorepb.StructuredQuery_Filter_UnaryFilter:
			eq[ft.UnaryFilter.GetField().GetFieldPath()] = true
		case *firestorepb.StructuredQuery_Filter_FieldFilter:
			path := ft.FieldFilter.GetField().GetFieldPath()
			switch ft.FieldFilter.GetOp() {
			case firestorepb.StructuredQuery_FieldFilter_EQUAL, firestorepb.StructuredQuery_FieldFilter_IN:
				eq[path] = true
			case firestorepb.StructuredQuery_FieldFilter_ARRAY_CONTAINS, firestorepb.StructuredQuery_FieldFilter_ARRAY_CONTAINS_ANY:
				s.ArrayContains = path
			default:
				if !slices.Contains(inequalities, path) {
					inequalities = append(inequalities, path)
				}
			}
		}
	}
	walk(q.GetWhere())
	delete(eq, "__name__")
	for f := range eq {
		s.Equalities = append(s.Equalities, f)
	}
	slices.Sort(s.Equalities)
	ordered := map[string]bool{}
	for _, o := range q.GetOrderBy() {
		path := o.GetField().GetFieldPath()
		if path == "__name__" || eq[path] || ordered[path] {
			continue
		}
		ordered[path] = true
		dir := "ASCENDING"
		if o.GetDirection() == firestorepb.StructuredQuery_DESCENDING {
			dir = "DESCENDING"
		}
		s.Ordered = append(s.Ordered, Field{FieldPath: path, Order: dir})
	}
	for _, path := range inequalities {
		if path != "__name__" && !ordered[path] {
			ordered[path] = true
			s.Ordered = append(s.Ordered, Field{FieldPath: path, Order: "ASCENDING"})
		}
	}
	return s
}

// Needs is the composite index q needs, false when single-field indexes serve it.
func (q Query) Needs() (Index, bool) {
	fields := len(q.Equalities) + len(q.Ordered)
	if q.ArrayContains != "" {
		fields++
	}
	if fields <= 1 || (q.ArrayContains == "" && len(q.Ordered) == 0) {
		return Index{}, false
	}
	idx := Index{CollectionGroup: q.CollectionGroup, QueryScope: q.Scope}
	for _, f := range q.Equalities {
		idx.Fields = append(idx.Fields, Field{FieldPath: f, Order: "ASCENDING"})
	}
	if q.ArrayContains != "" {
		idx.Fields = append(idx.Fields, Field{FieldPath: q.ArrayContains, ArrayConfig: "CONTAINS"})
	}
	idx.Fields = append(idx.Fields, q.Ordered...)
	return idx, true
}

// Serves reports whether idx serves q (see the package comment).
func (idx Index) Serves(q Query) bool {
	n := len(q.Equalities)
	if idx.CollectionGroup != q.CollectionGroup || cmpScope(idx.QueryScope) != q.Scope {
		return false
	}
	want := n + len(q.Ordered)
	if q.ArrayContains != "" {
		want++
	}
	if len(idx.Fields) != want {
		return false
	}
	var eqs []string
	for _, f := range idx.Fields[:n] {
		if f.ArrayConfig != "" {
			return false
		}
		eqs = append(eqs, f.FieldPath)
	}
	slices.Sort(eqs)
	if !slices.Equal(eqs, q.Equalities) {
		return false
	}
	rest := idx.Fields[n:]
	if q.ArrayContains != "" {
		if rest[0] != (Field{FieldPath: q.ArrayContains, ArrayConfig: "CONTAINS"}) {
			return false
		}
		rest = rest[1:]
	}
	return slices.Equal(rest, q.Ordered)
}

// cmpScope is a scope as Query spells it; the file may leave COLLECTION out.
func cmpScope(s string) string {
	if s == "" {
		return "COLLECTION"
	}
	return s
}

// Missing is the indexes needed by queries that no index of f serves, each once.
func (f File) Missing(queries []Query) []Index {
	var missing []Index
	seen := map[string]bool{}
	for _, q := range queries {
		idx, ok := q.Needs()
		if !ok || slices.ContainsFunc(f.Indexes, func(i Index) bool { return i.Serves(q) }) {
			continue
		}
		b, _ := json.Marshal(idx)
		if !seen[string(b)] {
			seen[string(b)] = true
			missing = append(missing, idx)
		}
	}
	return missing
}

// String is idx as a firestore.indexes.json entry, on one line.
func (idx Index) String() string {
	b, _ := json.Marshal(idx)
	return string(b)
}
