package definition_test

import (
	"os"
	"testing"

	"github.com/hangar-dev/hangar/automation/definition"
	"github.com/hangar-dev/hangar/automation/schedule"
)

// FuzzLoad feeds definition_json as a user writes it (untrusted: any API caller sends it) to
// Parse and Validate with the real checkers: whatever it holds, Load answers errors, never a
// panic, and a definition it accepts can be ordered.
func FuzzLoad(f *testing.F) {
	if pr, err := os.ReadFile("testdata/pr_review.json"); err == nil {
		f.Add(pr)
	}
	for _, seed := range []string{
		`{}`, `null`, `[]`, `{"version":1}`,
		`{"version":1,"entrypoints":[{"id":"m","type":"manual"}],"blocks":[]}`,
		`{"version":1,"entrypoints":[{"id":"s","type":"schedule","cron":"*/5 * * * *","timezone":"Europe/Paris"}],"blocks":[{"id":"a","type":"filter","condition":"true"}]}`,
		`{"version":1,"entrypoints":[{"id":"w","type":"webhook","event":"github.pull_request.opened"}],"blocks":[{"id":"a","type":"code","source":"return 1","needs":["b"]},{"id":"b","type":"code","source":"return 2","needs":["a"]}]}`,
		`{"version":1,"inputs":[{"key":"k","type":"string","default":"{{ event.x }}"}],"instance":{"key":"{{ event.number }}"},"blocks":[{"id":"t","type":"http","method":"POST","url":"{{ inputs.k }}","body":{"a":"{{ steps.x.y }}"}}]}`,
	} {
		f.Add([]byte(seed))
	}
	v := fuzzValidator()
	f.Fuzz(func(t *testing.T, data []byte) {
		def, errs := v.Load(data)
		if len(errs) > 0 {
			return
		}
		if _, errs := definition.Order(def.Blocks); len(errs) > 0 {
			t.Fatalf("Load accepted blocks Order refuses: %v", errs)
		}
	})
}

func fuzzValidator() definition.Validator {
	v := validator
	v.Cron = func(spec string) error { _, err := schedule.Parse(spec); return err }
	return v
}
