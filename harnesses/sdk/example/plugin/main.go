//go:build wasip1

// Command plugin is the echo harness as a WebAssembly plugin:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o echo.wasm ./harnesses/sdk/example/plugin
package main

import (
	"github.com/hangar-dev/hangar/harnesses/sdk"
	"github.com/hangar-dev/hangar/harnesses/sdk/example"
)

// main is never called: the module is a reactor (c-shared), but Go requires main in a command.
func main() {}

func init() { sdk.Register(example.Harness{}) }
