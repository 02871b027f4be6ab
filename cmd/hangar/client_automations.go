package main

import (
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
)

func newAutomationsCmd() *cobra.Command {
	return newClientGroup("automations", "Create, list, show, enable, disable and archive automations",
		newAutomationsListCmd, newAutomationsGetCmd, newAutomationsCreateCmd,
		newAutomationsEnableCmd(true), newAutomationsEnableCmd(false), newAutomationsArchiveCmd)
}

func newAutomationsListCmd(f *clientFlags) *cobra.Command {
	req := &appv1.ListAutomationsRequest{}
	cmd := clientCmd(f, "list [--include-archived]", "List automations", cobra.NoArgs, func(c *apiClient, _ *cobra.Command, _ []string) error {
		return send(c, c.automations.ListAutomations, req, func(w io.Writer, resp *appv1.ListAutomationsResponse) {
			header := []string{"ID", "NAME", "VERSION", "ENABLED", "ARCHIVED", "TRIGGERS", "LAST RUN"}
			table(w, header, resp.GetAutomations(), func(s *appv1.AutomationSummary) []string {
				a := s.GetAutomation()
				return []string{a.GetId(), a.GetName(), strconv.Itoa(int(a.GetCurrentVersion())), yesNo(a.GetEnabled()),
					yesNo(a.GetArchived()), s.GetTriggerSummary(), s.GetLastRun().GetStatus()}
			})
		})
	})
	cmd.Flags().BoolVar(&req.IncludeArchived, "include-archived", false, "list archived automations too")
	return cmd
}

func newAutomationsGetCmd(f *clientFlags) *cobra.Command {
	var builtin bool
	cmd := idCmd(f, "get ID", "Show an automation with its current definition", func(c *apiClient, _ *cobra.Command, id string) error {
		req := &appv1.GetAutomationRequest{Lookup: &appv1.GetAutomationRequest_Id{Id: id}}
		if builtin {
			req.Lookup = &appv1.GetAutomationRequest_BuiltinKey{BuiltinKey: id}
		}
		return send(c, c.automations.GetAutomation, req, nil)
	})
	cmd.Flags().BoolVar(&builtin, "builtin", false, "ID is a built-in automation's key")
	return cmd
}

func newAutomationsCreateCmd(f *clientFlags) *cobra.Command {
	req := &appv1.CreateAutomationRequest{}
	var file, inputsFile string
	cmd := clientCmd(f, "create --name NAME --file DEFINITION.json [flags]", "Create an automation from a definition file",
		cobra.NoArgs, func(c *apiClient, cmd *cobra.Command, _ []string) error {
			def, err := readInput(cmd, file)
			if err != nil {
				return err
			}
			req.DefinitionJson = string(def)
			if inputsFile != "" {
				inputs, err := readInput(cmd, inputsFile)
				if err != nil {
					return err
				}
				req.InputsJson = string(inputs)
			}
			return send(c, c.automations.CreateAutomation, req, nil)
		})
	fl := cmd.Flags()
	fl.StringVar(&req.Name, "name", "", "automation name")
	fl.StringVar(&req.Description, "description", "", "description")
	fl.BoolVar(&req.Enabled, "enable", false, "enable it at once")
	fl.StringVar(&file, "file", "", "read the definition as JSON from `FILE` (- for standard input)")
	fl.StringVar(&inputsFile, "inputs-file", "", "read the inputs as a JSON object from `FILE`")
	_ = cmd.MarkFlagRequired("name")
	_ = cmd.MarkFlagRequired("file")
	return cmd
}

// newAutomationsEnableCmd makes `enable` or, with enabled false, `disable`.
func newAutomationsEnableCmd(enabled bool) func(*clientFlags) *cobra.Command {
	use, short, done := "enable ID", "Enable an automation", "enabled"
	if !enabled {
		use, short, done = "disable ID", "Disable an automation", "disabled"
	}
	return func(f *clientFlags) *cobra.Command {
		return idCmd(f, use, short, func(c *apiClient, _ *cobra.Command, id string) error {
			req := &appv1.SetAutomationEnabledRequest{Id: id, Enabled: enabled}
			return send(c, c.automations.SetAutomationEnabled, req, func(w io.Writer, resp *appv1.SetAutomationEnabledResponse) {
				fmt.Fprintf(w, "%s automation %s", done, id)
				if next := resp.GetAutomation().GetNextFireAt(); next != "" {
					fmt.Fprintf(w, " (next run %s)", next)
				}
				fmt.Fprintln(w)
			})
		})
	}
}

func newAutomationsArchiveCmd(f *clientFlags) *cobra.Command {
	return idCmd(f, "archive ID", "Archive (and disable) an automation", func(c *apiClient, _ *cobra.Command, id string) error {
		req := &appv1.ArchiveAutomationRequest{Id: id}
		return send(c, c.automations.ArchiveAutomation, req, func(w io.Writer, _ *appv1.ArchiveAutomationResponse) {
			fmt.Fprintf(w, "archived automation %s\n", id)
		})
	})
}
