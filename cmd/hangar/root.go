package main

import (
	"errors"

	"github.com/spf13/cobra"
)

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "hangar",
		Short:         "Hangar orchestrates AI coding agents in sandboxes",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newDevCmd(), newHostCmd(), newEmulatorsCmd(), newFunctionsCmd(), newLoginCmd(), newLogoutCmd(), newWhoamiCmd())
	addClientCommands(root)
	return root
}

// exitStatus lets a command choose the process's exit code.
type exitStatus struct {
	code int
	err  error
}

func (e *exitStatus) Error() string { return e.err.Error() }
func (e *exitStatus) Unwrap() error { return e.err }

// errSilent marks a failure already reported (e.g. by a child process): main prints nothing.
var errSilent = errors.New("")

func exitCode(err error) int {
	var es *exitStatus
	if errors.As(err, &es) {
		return es.code
	}
	return 1
}
