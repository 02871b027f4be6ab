package main

import (
	"bytes"
	"fmt"
	"io"
	"strconv"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/platform/httpapi"
)

func newAutomationsCmd() *cobra.Command {
	return newClientGroup("automations", "Create, try, run and follow automations",
		newAutomationsListCmd, newAutomationsGetCmd, newAutomationsCreateCmd, newAutomationsSaveVersionCmd, newAutomationsDraftSaveCmd,
		newAutomationsEnableCmd(true), newAutomationsEnableCmd(false), newAutomationsArchiveCmd,
		newAutomationsEvalCmd, newAutomationsRenderCmd, newAutomationsRunCmd, newAutomationsRunsCmd,
		newAutomationsRunGetCmd, newAutomationsRunStopCmd, newAutomationsRunRetryCmd)
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

func newAutomationsSaveVersionCmd(f *clientFlags) *cobra.Command {
	var file string
	cmd := idCmd(f, "save-version ID --file DEFINITION.json", "Save a new version of an automation's definition",
		func(c *apiClient, cmd *cobra.Command, id string) error {
			def, err := readInput(cmd, file)
			if err != nil {
				return err
			}
			req := &appv1.SaveVersionRequest{AutomationId: id, DefinitionJson: string(def)}
			return send(c, c.automations.SaveVersion, req, func(w io.Writer, resp *appv1.SaveVersionResponse) {
				fmt.Fprintf(w, "automation %s is at version %d\n", id, resp.GetAutomation().GetCurrentVersion())
			})
		})
	cmd.Flags().StringVar(&file, "file", "", "read the definition as JSON from `FILE` (- for standard input)")
	_ = cmd.MarkFlagRequired("file")
	return cmd
}

func newAutomationsEvalCmd(f *clientFlags) *cobra.Command {
	req := &appv1.EvalCodeRequest{}
	cmd := clientCmd(f, "eval SOURCE [--mode js|cel] [--input JSON]", "Evaluate JavaScript or CEL in the automation sandbox",
		cobra.ExactArgs(1), func(c *apiClient, _ *cobra.Command, args []string) error {
			req.Source = args[0]
			return send(c, c.automations.EvalCode, req, func(w io.Writer, resp *appv1.EvalCodeResponse) {
				for _, l := range resp.GetLogs() {
					fmt.Fprintln(w, "log:", l)
				}
				if resp.ErrorName != nil {
					fmt.Fprintf(w, "%s: %s (line %d)\n", resp.GetErrorName(), resp.GetErrorMessage(), resp.GetErrorLine())
					return
				}
				fmt.Fprintln(w, resp.GetValueJson())
			})
		})
	cmd.Flags().StringVar(&req.Mode, "mode", "js", "js or cel")
	cmd.Flags().StringVar(&req.InputJson, "input", "", "JSON bound as input")
	return cmd
}

func newAutomationsRenderCmd(f *clientFlags) *cobra.Command {
	var payloadFile string
	cmd := idCmd(f, "render ID [--payload-file F]", "Render every block against a payload, with no side effect",
		func(c *apiClient, cmd *cobra.Command, id string) error {
			req := &appv1.TestRenderRequest{AutomationId: id}
			if payloadFile != "" {
				payload, err := readInput(cmd, payloadFile)
				if err != nil {
					return err
				}
				req.Sample = &appv1.TestRenderRequest_PayloadJson{PayloadJson: string(payload)}
			}
			return send(c, c.automations.TestRender, req, nil)
		})
	cmd.Flags().StringVar(&payloadFile, "payload-file", "", "read the event payload from `FILE` (- for standard input)")
	return cmd
}

func newAutomationsRunCmd(f *clientFlags) *cobra.Command {
	var payloadFile string
	var dry bool
	cmd := idCmd(f, "run ID [--payload-file F] [--dry]", "Start a run now (or a dry run)",
		func(c *apiClient, cmd *cobra.Command, id string) error {
			var payload string
			if payloadFile != "" {
				b, err := readInput(cmd, payloadFile)
				if err != nil {
					return err
				}
				payload = string(b)
			}
			if dry {
				req := &appv1.DryRunRequest{AutomationId: id}
				if payload != "" {
					req.Sample = &appv1.DryRunRequest_PayloadJson{PayloadJson: payload}
				}
				return send(c, c.automations.DryRun, req, func(w io.Writer, resp *appv1.DryRunResponse) { fmt.Fprintln(w, resp.GetRunId()) })
			}
			req := &appv1.RunNowRequest{AutomationId: id}
			if payload != "" {
				req.PayloadJson = &payload
			}
			return send(c, c.automations.RunNow, req, func(w io.Writer, resp *appv1.RunNowResponse) { fmt.Fprintln(w, resp.GetRunId()) })
		})
	cmd.Flags().StringVar(&payloadFile, "payload-file", "", "read the event payload from `FILE` (- for standard input)")
	cmd.Flags().BoolVar(&dry, "dry", false, "record what blocks with side effects would do instead of doing it")
	return cmd
}

func newAutomationsRunsCmd(f *clientFlags) *cobra.Command {
	req := &appv1.ListRunsRequest{}
	cmd := idCmd(f, "runs ID [--limit N]", "List an automation's runs, newest first", func(c *apiClient, _ *cobra.Command, id string) error {
		req.AutomationId = id
		return send(c, c.automationRuns.ListRuns, req, func(w io.Writer, resp *appv1.ListRunsResponse) {
			table(w, []string{"RUN", "STATUS", "SOURCE", "EVENT", "CREATED", "ERROR"}, resp.GetRuns(), func(r *appv1.AutomationRunBrief) []string {
				source := r.GetTriggerSource()
				if r.GetDryRun() {
					source += " (dry run)"
				}
				return []string{r.GetId(), r.GetStatus(), source, r.GetEventKey(), r.GetCreatedAt(), r.GetError()}
			})
		})
	})
	cmd.Flags().Int32Var(&req.Limit, "limit", 0, "at most this many runs")
	return cmd
}

func newAutomationsRunGetCmd(f *clientFlags) *cobra.Command {
	return idCmd(f, "run-get RUN_ID", "Show a run with its steps", func(c *apiClient, _ *cobra.Command, id string) error {
		return send(c, c.automationRuns.GetRun, &appv1.GetRunRequest{RunId: id}, nil)
	})
}

func newAutomationsRunStopCmd(f *clientFlags) *cobra.Command {
	return idCmd(f, "run-stop RUN_ID", "Stop a run", func(c *apiClient, _ *cobra.Command, id string) error {
		return send(c, c.automationRuns.StopRun, &appv1.StopRunRequest{RunId: id}, func(w io.Writer, resp *appv1.StopRunResponse) {
			if resp.GetSent() {
				fmt.Fprintf(w, "stopping run %s\n", id)
			} else {
				fmt.Fprintf(w, "run %s had ended\n", id)
			}
		})
	})
}

func newAutomationsRunRetryCmd(f *clientFlags) *cobra.Command {
	var from string
	cmd := idCmd(f, "run-retry RUN_ID [--from BLOCK]", "Retry a run from a block, reusing earlier outputs", func(c *apiClient, _ *cobra.Command, id string) error {
		req := &appv1.RetryRunRequest{RunId: id}
		if from != "" {
			req.FromStepId = &from
		}
		return send(c, c.automationRuns.RetryRun, req, func(w io.Writer, resp *appv1.RetryRunResponse) { fmt.Fprintln(w, resp.GetRunId()) })
	})
	cmd.Flags().StringVar(&from, "from", "", "the block to start from (default: the first that did not succeed)")
	return cmd
}

func newAutomationsDraftSaveCmd(f *clientFlags) *cobra.Command {
	return idCmd(f, "draft-save ID", "Save the definition a drafting agent wrote in its session as a new version",
		func(c *apiClient, _ *cobra.Command, id string) error {
			got, err := c.automations.GetAutomation(c.ctx, connect.NewRequest(&appv1.GetAutomationRequest{Lookup: &appv1.GetAutomationRequest_Id{Id: id}}))
			if err != nil {
				return err
			}
			session := got.Msg.GetAutomation().GetDraftSessionId()
			if session == "" {
				return usageError("automation %s has no draft session", id)
			}
			stream, err := c.sessions.ReadFile(c.ctx, connect.NewRequest(&appv1.ReadFileRequest{SessionId: session, Path: httpapi.AutomationDraftFile}))
			if err != nil {
				return err
			}
			defer stream.Close()
			var def bytes.Buffer
			if _, err := receiveFile(stream, &def, sessionPath{session: session, path: httpapi.AutomationDraftFile}); err != nil {
				return err
			}
			req := &appv1.SaveVersionRequest{AutomationId: id, DefinitionJson: def.String()}
			return send(c, c.automations.SaveVersion, req, func(w io.Writer, resp *appv1.SaveVersionResponse) {
				fmt.Fprintf(w, "saved the draft of session %s: automation %s is at version %d\n", session, id, resp.GetAutomation().GetCurrentVersion())
			})
		})
}
