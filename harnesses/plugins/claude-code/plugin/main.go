//go:build wasip1

// Command plugin is the claude-code harness as a WebAssembly plugin (see harnesses/plugins/cmd/buildplugins).
// It builds for wasip1 only, so no native binary of it can shadow a real command.
package main

import (
	claudecode "github.com/hangar-dev/hangar/harnesses/plugins/claude-code"
	"github.com/hangar-dev/hangar/harnesses/sdk"
)

// main is never called: the module is a reactor (c-shared), but Go requires main in a command.
func main() {}

func init() { sdk.Register(claudecode.Harness{}) }
