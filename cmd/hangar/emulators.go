package main

import (
	"github.com/spf13/cobra"

	"github.com/hangar-dev/hangar/emulators"
)

// newEmulatorsCmd runs a command with a Firestore and Pub/Sub emulator pair, started for it and
// stopped after it: `make test` uses it so that one pair serves the whole test run.
func newEmulatorsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "emulators -- COMMAND [ARGS...]",
		Short: "Run a command with the Firestore and Pub/Sub emulators (FIRESTORE_EMULATOR_HOST, PUBSUB_EMULATOR_HOST set)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			code, err := emulators.Exec(cmd.Context(), emulators.Options{ReuseFromEnv: true}, args[0], args[1:]...)
			if err != nil {
				return err
			}
			if code != 0 {
				return &exitStatus{code: code, err: errSilent}
			}
			return nil
		},
	}
}
