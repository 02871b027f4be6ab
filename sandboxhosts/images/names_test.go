package images

import (
	"errors"
	"strings"
	"testing"
)

func TestCleanName(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    string
		refused bool
	}{
		{name: "plain path is kept", in: "usr/bin/env", want: "usr/bin/env"},
		{name: "dot slash prefix is dropped", in: "./usr/bin/", want: "usr/bin"},
		{name: "absolute path becomes relative", in: "/etc/passwd", want: "etc/passwd"},
		{name: "repeated slashes collapse", in: "a//b///c", want: "a/b/c"},
		{name: "root entry is empty", in: "./", want: ""},
		{name: "leading dotdot is refused", in: "../x", refused: true},
		{name: "inner dotdot is refused", in: "a/../b", refused: true},
		{name: "NUL byte is refused", in: "a\x00b", refused: true},
		{name: "component over 255 bytes is refused", in: strings.Repeat("x", 256), refused: true},
		{name: "component of 255 bytes is fine", in: strings.Repeat("x", 255), want: strings.Repeat("x", 255)},
		{name: "path over 4096 bytes is refused", in: strings.Repeat("a/", 2049), refused: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := cleanName(tt.in)
			if tt.refused {
				if !errors.Is(err, ErrUnsafeLayer) {
					t.Fatalf("cleanName(%q) = %q, %v; want ErrUnsafeLayer", tt.in, got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("cleanName(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestSuggestedResources(t *testing.T) {
	tests := []struct {
		name    string
		labels  map[string]string
		want    Resources
		wantErr string
	}{
		{name: "no labels means zero", labels: nil},
		{name: "all labels parse", labels: map[string]string{LabelCPUs: "1.5", LabelMemoryMB: "512", LabelPids: "256", LabelDiskMB: "4096"},
			want: Resources{CPUs: 1.5, MemoryMB: 512, Pids: 256, DiskMB: 4096}},
		{name: "one label leaves the others zero", labels: map[string]string{LabelMemoryMB: "2048"}, want: Resources{MemoryMB: 2048}},
		{name: "non-numeric cpus is an error", labels: map[string]string{LabelCPUs: "two"}, wantErr: LabelCPUs},
		{name: "negative memory is an error", labels: map[string]string{LabelMemoryMB: "-1"}, wantErr: LabelMemoryMB},
		{name: "fractional pids is an error", labels: map[string]string{LabelPids: "1.5"}, wantErr: LabelPids},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := suggestedResources(tt.labels)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %+v, %v; want an error naming %s", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}
