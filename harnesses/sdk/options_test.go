package sdk

import (
	"reflect"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/harnesses/abi"
)

func TestResolveMode(t *testing.T) {
	withDefault := abi.Descriptor{Name: "h", Modes: []abi.Mode{{ID: "ask"}, {ID: "auto", Default: true}}}
	noDefault := abi.Descriptor{Name: "h", Modes: []abi.Mode{{ID: "ask"}}}
	tests := []struct {
		name    string
		d       abi.Descriptor
		mode    string
		want    string
		wantErr string
	}{
		{name: "listed mode", d: withDefault, mode: "ask", want: "ask"},
		{name: "empty is the default", d: withDefault, mode: "", want: "auto"},
		{name: "empty without a default stays empty", d: noDefault, mode: "", want: ""},
		{name: "empty without modes stays empty", d: abi.Descriptor{Name: "h"}, mode: "", want: ""},
		{name: "unknown mode names the choices", d: withDefault, mode: "yolo", wantErr: `h has no mode "yolo" (modes: ask, auto)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ResolveMode(tt.d, tt.mode)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ResolveMode = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestCheckEffort(t *testing.T) {
	d := abi.Descriptor{Name: "h", Effort: []abi.Option{{ID: "low"}, {ID: "high"}}}
	tests := []struct {
		effort  string
		wantErr string
	}{
		{effort: ""},
		{effort: "high"},
		{effort: "max", wantErr: `h has no effort level "max" (levels: low, high)`},
	}
	for _, tt := range tests {
		t.Run(tt.effort, func(t *testing.T) {
			err := CheckEffort(d, tt.effort)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("CheckEffort(%q) = %v, want %q", tt.effort, err, tt.wantErr)
			}
		})
	}
}

func TestEnvLetsTheCallerWin(t *testing.T) {
	tests := []struct {
		name     string
		base     map[string]string
		defaults map[string]string
		want     map[string]string
	}{
		{name: "nothing is nil", want: nil},
		{name: "defaults fill gaps", base: map[string]string{"A": "1"}, defaults: map[string]string{"B": "2"}, want: map[string]string{"A": "1", "B": "2"}},
		{name: "caller wins", base: map[string]string{"A": "mine"}, defaults: map[string]string{"A": "plugin's"}, want: map[string]string{"A": "mine"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Env(tt.base, tt.defaults); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Env = %v, want %v", got, tt.want)
			}
		})
	}
	base := map[string]string{"A": "1"}
	Env(base, map[string]string{"B": "2"})
	if len(base) != 1 {
		t.Fatalf("Env changed its argument: %v", base)
	}
}

func TestResolveModelFallsBackToTheDefault(t *testing.T) {
	d := abi.Descriptor{Name: "h", Models: []abi.Option{{ID: "small"}, {ID: "big", Default: true}}}
	tests := []struct {
		name  string
		d     abi.Descriptor
		model string
		want  string
	}{
		{name: "none asked runs the default", d: d, want: "big"},
		{name: "a listed model is kept", d: d, model: "small", want: "small"},
		{name: "an unlisted model is kept, as a router offers", d: d, model: "router/next", want: "router/next"},
		{name: "no default leaves the CLI's own", d: abi.Descriptor{Name: "h", Models: []abi.Option{{ID: "small"}}}, want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ResolveModel(tt.d, tt.model); got != tt.want {
				t.Fatalf("ResolveModel(%q) = %q, want %q", tt.model, got, tt.want)
			}
		})
	}
}
