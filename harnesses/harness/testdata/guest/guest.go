//go:build wasip1

// Package guest is the plugin side of the ABI for the test plugins: request buffers and replies
// in the module's memory. It is written by hand because the tests must not depend on the SDK.
package guest

import (
	"encoding/json"
	"fmt"
	"unsafe"
)

var (
	// request and reply stay referenced until the next call so that the garbage collector keeps
	// them where the host reads and writes them.
	request []byte
	reply   []byte
)

// Alloc implements hangar_alloc.
func Alloc(size int32) int32 {
	request = make([]byte, size)
	return address(request)
}

// Decode reads the request the host wrote into the buffer of the last Alloc.
func Decode(ptr, size int32, v any) error {
	if ptr != address(request) || int(size) > len(request) {
		return fmt.Errorf("request (%d, %d) is not in the buffer handed out", ptr, size)
	}
	return json.Unmarshal(request[:size], v)
}

func address(b []byte) int32 { return int32(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) }

// Raw answers b as it is, valid or not.
func Raw(b []byte) uint64 {
	reply = b
	return Span(address(reply), int32(len(reply)))
}

// Span packs an answer's place the way the ABI returns it.
func Span(ptr, size int32) uint64 {
	return uint64(uint32(ptr))<<32 | uint64(uint32(size))
}

// OK answers v as the result.
func OK(v any) uint64 {
	b, err := json.Marshal(struct {
		OK any `json:"ok"`
	}{v})
	if err != nil {
		return Error(err.Error())
	}
	return Raw(b)
}

// Error answers a refusal.
func Error(msg string) uint64 {
	b, _ := json.Marshal(struct {
		Error string `json:"error"`
	}{msg})
	return Raw(b)
}
