// Package opt turns Go values into the API's optional fields: a zero value is an absent field,
// so records keep plain strings and the API shows "not set" rather than "".
package opt

// String is nil for "", else a pointer to s.
func String(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
