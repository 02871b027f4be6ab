//go:build wasip1 && !badversion

package main

import "github.com/hangar-dev/hangar/harnesses/abi"

//go:wasmexport hangar_abi_version
func version() int32 { return abi.Version }
