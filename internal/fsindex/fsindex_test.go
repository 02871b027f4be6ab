package fsindex

import (
	"testing"

	"cloud.google.com/go/firestore/apiv1/firestorepb"
)

func field(path string, op firestorepb.StructuredQuery_FieldFilter_Operator) *firestorepb.StructuredQuery_Filter {
	return &firestorepb.StructuredQuery_Filter{FilterType: &firestorepb.StructuredQuery_Filter_FieldFilter{
		FieldFilter: &firestorepb.StructuredQuery_FieldFilter{Field: &firestorepb.StructuredQuery_FieldReference{FieldPath: path}, Op: op},
	}}
}

func and(fs ...*firestorepb.StructuredQuery_Filter) *firestorepb.StructuredQuery_Filter {
	return &firestorepb.StructuredQuery_Filter{FilterType: &firestorepb.StructuredQuery_Filter_CompositeFilter{
		CompositeFilter: &firestorepb.StructuredQuery_CompositeFilter{Op: firestorepb.StructuredQuery_CompositeFilter_AND, Filters: fs},
	}}
}

func order(path string, desc bool) *firestorepb.StructuredQuery_Order {
	d := firestorepb.StructuredQuery_ASCENDING
	if desc {
		d = firestorepb.StructuredQuery_DESCENDING
	}
	return &firestorepb.StructuredQuery_Order{Field: &firestorepb.StructuredQuery_FieldReference{FieldPath: path}, Direction: d}
}

func query(where *firestorepb.StructuredQuery_Filter, orders ...*firestorepb.StructuredQuery_Order) *firestorepb.StructuredQuery {
	return &firestorepb.StructuredQuery{
		From:  []*firestorepb.StructuredQuery_CollectionSelector{{CollectionId: "tasks"}},
		Where: where, OrderBy: orders,
	}
}

const (
	eq  = firestorepb.StructuredQuery_FieldFilter_EQUAL
	lt  = firestorepb.StructuredQuery_FieldFilter_LESS_THAN
	arr = firestorepb.StructuredQuery_FieldFilter_ARRAY_CONTAINS
)

func TestQueriesNeedACompositeIndexOnlyWhenSingleFieldIndexesCannotServeThem(t *testing.T) {
	tests := []struct {
		name  string
		q     *firestorepb.StructuredQuery
		needs []Field
	}{
		{"no filter", query(nil), nil},
		{"one equality", query(field("owner", eq)), nil},
		{"equalities merge", query(and(field("owner", eq), field("status", eq))), nil},
		{"equalities ordered by name", query(and(field("owner", eq), field("status", eq)), order("__name__", false)), nil},
		{"one order", query(nil, order("created_at", true)), nil},
		{"range and order on one field", query(field("created_at", lt), order("created_at", true)), nil},
		{"order on an equality field is dropped", query(field("owner", eq), order("owner", false)), nil},
		{"equality and order", query(field("owner", eq), order("created_at", true)),
			[]Field{{FieldPath: "owner", Order: "ASCENDING"}, {FieldPath: "created_at", Order: "DESCENDING"}}},
		{"equality and range orders by the range", query(and(field("owner", eq), field("due", lt))),
			[]Field{{FieldPath: "owner", Order: "ASCENDING"}, {FieldPath: "due", Order: "ASCENDING"}}},
		{"two orders", query(nil, order("name_key", false), order("created_at", true)),
			[]Field{{FieldPath: "name_key", Order: "ASCENDING"}, {FieldPath: "created_at", Order: "DESCENDING"}}},
		{"array-contains and equality", query(and(field("tags", arr), field("owner", eq))),
			[]Field{{FieldPath: "owner", Order: "ASCENDING"}, {FieldPath: "tags", ArrayConfig: "CONTAINS"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Shape(tt.q)
			idx, ok := s.Needs()
			if ok != (tt.needs != nil) {
				t.Fatalf("needs an index: %v (%v), want %v", ok, idx, tt.needs != nil)
			}
			if !ok {
				return
			}
			want := Index{CollectionGroup: "tasks", QueryScope: "COLLECTION", Fields: tt.needs}
			if idx.String() != want.String() {
				t.Fatalf("needs %s, want %s", idx, want)
			}
			if !want.Serves(s) {
				t.Fatal("the index it needs does not serve it")
			}
			reversed := want
			reversed.Fields = append([]Field(nil), want.Fields...)
			last := &reversed.Fields[len(reversed.Fields)-1]
			if last.Order == "ASCENDING" {
				last.Order = "DESCENDING"
			} else if last.Order == "DESCENDING" {
				last.Order = "ASCENDING"
			}
			if last.ArrayConfig == "" && reversed.Serves(s) {
				t.Fatal("an index in other directions serves it")
			}
			if len((File{Indexes: []Index{want}}).Missing([]Query{s})) != 0 || len((File{}).Missing([]Query{s, s})) != 1 {
				t.Fatal("Missing disagrees with Serves")
			}
		})
	}
}

// The repository's file parses, and each of its indexes is one Firestore would accept: two
// fields or more, each ordered or array-contains, in a known scope, none twice.
func TestTheIndexesFileIsWellFormed(t *testing.T) {
	f, err := Read("../../firestore.indexes.json")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, idx := range f.Indexes {
		if seen[idx.String()] {
			t.Errorf("listed twice: %s", idx)
		}
		seen[idx.String()] = true
		if idx.CollectionGroup == "" || (idx.QueryScope != "COLLECTION" && idx.QueryScope != "COLLECTION_GROUP") || len(idx.Fields) < 2 {
			t.Errorf("not a composite index: %s", idx)
		}
		for _, fd := range idx.Fields {
			if fd.FieldPath == "" || (fd.Order == "") == (fd.ArrayConfig == "") {
				t.Errorf("%s: field %+v wants a path and either an order or an array config", idx, fd)
			}
		}
	}
}
