// Command hangar is Hangar's one binary: `hangar dev` runs the whole system locally, and the
// other commands are the API's command-line client.
package main

import (
	"errors"
	"fmt"
	"os"
)

func main() {
	if err := newRootCmd().Execute(); err != nil {
		if !errors.Is(err, errSilent) {
			fmt.Fprintln(os.Stderr, "hangar:", err)
		}
		os.Exit(exitCode(err))
	}
}
