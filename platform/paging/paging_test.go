package paging

import "testing"

func TestBoundsUnmarshalText(t *testing.T) {
	tests := []struct {
		name, text string
		want       Bounds
		wantErr    bool
	}{
		{"default and max", "50/200", Bounds{Default: 50, Max: 200}, false},
		{"equal", "20/20", Bounds{Default: 20, Max: 20}, false},
		{"max only", "200", Bounds{}, true},
		{"default above max", "300/200", Bounds{}, true},
		{"zero default", "0/200", Bounds{}, true},
		{"words", "fifty/two hundred", Bounds{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b Bounds
			err := b.UnmarshalText([]byte(tt.text))
			if (err != nil) != tt.wantErr || b != tt.want {
				t.Errorf("UnmarshalText(%q) = %+v, %v; want %+v, error %v", tt.text, b, err, tt.want, tt.wantErr)
			}
		})
	}
}
