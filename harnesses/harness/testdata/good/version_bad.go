//go:build wasip1 && badversion

package main

// version claims an ABI the host does not speak; built with -tags badversion.
//
//go:wasmexport hangar_abi_version
func version() int32 { return 2 }
