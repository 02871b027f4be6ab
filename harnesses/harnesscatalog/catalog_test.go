package harnesscatalog

import "testing"

// A harness's egress opens where an admin vouched for it, or where its registrant decides the
// network; nowhere else, and never for a user "" (no registrant is nobody).
func TestEgressAppliesOnlyWhereAnAdminOrItsRegistrantDecides(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		entry Entry
		user  string
		want  bool
	}{
		{"a built-in, for anyone", Entry{BuiltIn: true}, "user_a", true},
		{"approved, for anyone", Entry{CreatedBy: "user_b", EgressApprovedBy: "user_root"}, "user_a", true},
		{"pending, for its registrant", Entry{CreatedBy: "user_b"}, "user_b", true},
		{"pending, for another user", Entry{CreatedBy: "user_b"}, "user_a", false},
		{"pending, for no one", Entry{CreatedBy: ""}, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.entry.EgressAppliesFor(tc.user); got != tc.want {
				t.Fatalf("EgressAppliesFor(%q) = %v, want %v", tc.user, got, tc.want)
			}
		})
	}
}
