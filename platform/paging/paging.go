// Package paging turns the API's page / page_size and limit inputs into bounded offsets and
// sizes, with one rule for every list: zero means the default, above the maximum is clamped,
// negative is an error.
package paging

import (
	"fmt"

	"github.com/hangar-dev/hangar/platform/apierr"
)

// Bounds is a list's default and maximum page size.
type Bounds struct {
	Default int
	Max     int
}

// UnmarshalText reads bounds written "default/max", e.g. "50/200", so a configuration can state
// each list's bounds in one value.
func (b *Bounds) UnmarshalText(text []byte) error {
	var d, m int
	if n, err := fmt.Sscanf(string(text), "%d/%d", &d, &m); err != nil || n != 2 || d < 1 || m < d {
		return fmt.Errorf("page bounds %q: want default/max, e.g. 50/200, with 1 <= default <= max", text)
	}
	*b = Bounds{Default: d, Max: m}
	return nil
}

// Page is a resolved page request.
type Page struct {
	Offset int
	Size   int
}

// FromPage resolves 1-based page numbers (0 means the first page) and page sizes.
func FromPage(page, pageSize int32, b Bounds) (Page, error) {
	if page < 0 {
		return Page{}, apierr.InvalidArgument("page", "must be 0 or more (pages count from 1; 0 means the first page)")
	}
	size, err := Limit("page_size", int64(pageSize), b)
	if err != nil {
		return Page{}, err
	}
	if page == 0 {
		page = 1
	}
	return Page{Offset: (int(page) - 1) * size, Size: size}, nil
}

// Limit resolves a size field named field: 0 is the default, above the maximum is the maximum.
func Limit(field string, limit int64, b Bounds) (int, error) {
	switch {
	case limit < 0:
		return 0, apierr.InvalidArgument(field, "must not be negative")
	case limit == 0:
		return b.Default, nil
	case limit > int64(b.Max):
		return b.Max, nil
	}
	return int(limit), nil
}
