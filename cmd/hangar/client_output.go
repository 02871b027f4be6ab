package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// jsonOut prints responses with the API's snake_case field names.
var jsonOut = protojson.MarshalOptions{UseProtoNames: true, Multiline: true, EmitUnpopulated: false}

// show prints the response resp: its record's id under --quiet, as protojson under --json,
// otherwise by calling human with a writer that aligns tab-separated columns.
func (c *apiClient) show(resp proto.Message, human func(w io.Writer)) error {
	if c.quiet {
		id, ok := recordID(sole(resp))
		if !ok {
			return fmt.Errorf("--quiet: the %s carries no id", resp.ProtoReflect().Descriptor().Name())
		}
		_, err := fmt.Fprintln(c.out, id)
		return err
	}
	if c.json {
		b, err := jsonOut.Marshal(resp)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(c.out, "%s\n", b)
		return err
	}
	tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
	human(tw)
	return tw.Flush()
}

// table writes a header row and one row of cells per item; an empty cell shows as "-".
func table[T any](w io.Writer, header []string, items []T, cells func(T) []string) {
	fmt.Fprintln(w, strings.Join(header, "\t"))
	for _, it := range items {
		row := cells(it)
		for i, c := range row {
			if c == "" {
				row[i] = "-"
			}
		}
		fmt.Fprintln(w, strings.Join(row, "\t"))
	}
}

// recordID is m's "id" field, else its first set "<something>_id" field (CreateSessionResponse's
// session_id).
func recordID(m proto.Message) (string, bool) {
	r := m.ProtoReflect()
	fields := r.Descriptor().Fields()
	if fd := fields.ByName("id"); fd != nil && fd.Kind() == protoreflect.StringKind {
		return r.Get(fd).String(), true
	}
	for i := range fields.Len() {
		fd := fields.Get(i)
		if fd.Kind() == protoreflect.StringKind && !fd.IsList() && strings.HasSuffix(string(fd.Name()), "_id") && r.Has(fd) {
			return r.Get(fd).String(), true
		}
	}
	return "", false
}

// record writes m's populated fields as "field: value" lines in declaration order. Nested
// messages are flattened with dotted names (network.default) and list elements numbered
// (sessions[0].session_id).
func record(w io.Writer, m proto.Message) {
	writeFields(w, "", m.ProtoReflect())
}

// sole is the record a response such as GetTaskResponse carries in its one field, else resp.
func sole(resp proto.Message) proto.Message {
	m := resp.ProtoReflect()
	if fields := m.Descriptor().Fields(); fields.Len() == 1 {
		if fd := fields.Get(0); fd.Message() != nil && fd.Cardinality() != protoreflect.Repeated {
			return m.Get(fd).Message().Interface()
		}
	}
	return resp
}

func writeFields(w io.Writer, prefix string, m protoreflect.Message) {
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if !m.Has(fd) {
			continue
		}
		name, v := prefix+string(fd.Name()), m.Get(fd)
		switch {
		case fd.IsList() && fd.Message() != nil:
			for j := range v.List().Len() {
				writeFields(w, fmt.Sprintf("%s[%d].", name, j), v.List().Get(j).Message())
			}
		case fd.IsList():
			vals := make([]string, v.List().Len())
			for j := range vals {
				vals[j] = scalar(fd, v.List().Get(j))
			}
			fmt.Fprintf(w, "%s:\t%s\n", name, strings.Join(vals, ", "))
		case fd.IsMap():
			var keys []protoreflect.MapKey
			v.Map().Range(func(k protoreflect.MapKey, _ protoreflect.Value) bool {
				keys = append(keys, k)
				return true
			})
			slices.SortFunc(keys, func(a, b protoreflect.MapKey) int { return strings.Compare(a.String(), b.String()) })
			for _, k := range keys {
				fmt.Fprintf(w, "%s.%s:\t%s\n", name, k.String(), scalar(fd.MapValue(), v.Map().Get(k)))
			}
		case fd.Message() != nil:
			writeFields(w, name+".", v.Message())
		default:
			fmt.Fprintf(w, "%s:\t%s\n", name, scalar(fd, v))
		}
	}
}

// scalar formats a non-message value of field fd.
func scalar(fd protoreflect.FieldDescriptor, v protoreflect.Value) string {
	if fd.Kind() == protoreflect.EnumKind {
		if ev := fd.Enum().Values().ByNumber(v.Enum()); ev != nil {
			return string(ev.Name())
		}
	}
	return fmt.Sprint(v.Interface())
}

// yesNo is a boolean table cell.
func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// truncate shortens s to at most n runes, marking the cut with "…".
func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
