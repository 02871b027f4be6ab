package host

import (
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/hangar-dev/hangar/platform/apierr"
)

func TestCheckArgSizesRefusesWhatExecveWould(t *testing.T) {
	big := strings.Repeat("a", maxArgStrlen)
	for _, tc := range []struct {
		name      string
		argv, env []string
		field     string
	}{
		{"an argument at the kernel's limit", []string{"echo", strings.Repeat("a", maxArgStrlen-1)}, nil, ""},
		{"an argument past the kernel's limit", []string{"echo", big}, nil, "argv"},
		{"a variable past the kernel's limit", []string{"env"}, []string{"X=" + big}, "env"},
		{"many arguments past the total", append([]string{"echo"}, strings.Split(strings.Repeat(strings.Repeat("a", 100<<10)+" ", 11), " ")...), nil, "argv"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var v apierr.Violations
			checkArgSizes(&v, "argv", tc.argv, tc.env)
			err := v.Err()
			if tc.field == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), tc.field+":") {
				t.Fatalf("err = %v, want invalid_argument naming %s", err, tc.field)
			}
		})
	}
}
