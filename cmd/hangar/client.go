package main

import "github.com/spf13/cobra"

// addClientCommands adds the API client commands (tasks, profiles, keys).
func addClientCommands(root *cobra.Command) {}
