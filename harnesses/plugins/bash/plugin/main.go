//go:build wasip1

// Command plugin is the bash harness as a WebAssembly plugin (see harnesses/plugins/cmd/buildplugins).
// It builds for wasip1 only, so no native binary of it can shadow a real command.
package main

import (
	"github.com/hangar-dev/hangar/harnesses/plugins/bash"
	"github.com/hangar-dev/hangar/harnesses/sdk"

	// The bash harness takes client tool results (hangar_tool).
	_ "github.com/hangar-dev/hangar/harnesses/sdk/toolresults"
)

// main is never called: the module is a reactor (c-shared), but Go requires main in a command.
func main() {}

func init() { sdk.Register(bash.Harness{}) }
