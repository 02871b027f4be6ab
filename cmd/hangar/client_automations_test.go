package main

import (
	"testing"

	"google.golang.org/protobuf/proto"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
)

func TestAutomationsCommands(t *testing.T) {
	const def = `{"version": 1, "entrypoints": [{"id": "go", "type": "manual"}], "blocks": []}`
	defFile := writeTemp(t, "def.json", def)
	inputsFile := writeTemp(t, "inputs.json", `{"label": "bug"}`)
	daily := &appv1.Automation{Id: "auto_1", Name: "Daily", CurrentVersion: 2, Enabled: true, NextFireAt: proto.String("2026-01-02T10:00:00.000Z")}
	for _, tc := range []struct {
		name      string
		args      []string
		stdin     string
		procedure string
		want      proto.Message
		wantOut   string
	}{
		{"list", []string{"list"}, "", appv1connect.AutomationServiceListAutomationsProcedure, &appv1.ListAutomationsRequest{},
			"ID      NAME   VERSION  ENABLED  ARCHIVED  TRIGGERS          LAST RUN\n" +
				"auto_1  Daily  2        yes      no        Every day, 10:00  completed\n"},
		{"list archived", []string{"list", "--include-archived"}, "", appv1connect.AutomationServiceListAutomationsProcedure,
			&appv1.ListAutomationsRequest{IncludeArchived: true}, ""},
		{"get", []string{"get", "auto_1"}, "", appv1connect.AutomationServiceGetAutomationProcedure,
			&appv1.GetAutomationRequest{Lookup: &appv1.GetAutomationRequest_Id{Id: "auto_1"}}, ""},
		{"get built-in", []string{"get", "--builtin", "cleanup"}, "", appv1connect.AutomationServiceGetAutomationProcedure,
			&appv1.GetAutomationRequest{Lookup: &appv1.GetAutomationRequest_BuiltinKey{BuiltinKey: "cleanup"}}, ""},
		{"create", []string{"create", "--name", "Daily", "--description", "d", "--enable", "--file", defFile, "--inputs-file", inputsFile}, "",
			appv1connect.AutomationServiceCreateAutomationProcedure,
			&appv1.CreateAutomationRequest{Name: "Daily", Description: "d", Enabled: true, DefinitionJson: def, InputsJson: `{"label": "bug"}`}, ""},
		{"create from stdin", []string{"create", "--name", "Daily", "--file", "-"}, def,
			appv1connect.AutomationServiceCreateAutomationProcedure, &appv1.CreateAutomationRequest{Name: "Daily", DefinitionJson: def}, ""},
		{"enable", []string{"enable", "auto_1"}, "", appv1connect.AutomationServiceSetAutomationEnabledProcedure,
			&appv1.SetAutomationEnabledRequest{Id: "auto_1", Enabled: true}, "enabled automation auto_1 (next run 2026-01-02T10:00:00.000Z)\n"},
		{"disable", []string{"disable", "auto_1"}, "", appv1connect.AutomationServiceSetAutomationEnabledProcedure,
			&appv1.SetAutomationEnabledRequest{Id: "auto_1"}, ""},
		{"archive", []string{"archive", "auto_1"}, "", appv1connect.AutomationServiceArchiveAutomationProcedure,
			&appv1.ArchiveAutomationRequest{Id: "auto_1"}, "archived automation auto_1\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAPI(t)
			reply(f, appv1connect.AutomationServiceListAutomationsProcedure, &appv1.ListAutomationsResponse{Automations: []*appv1.AutomationSummary{
				{Automation: daily, TriggerSummary: "Every day, 10:00", LastRun: &appv1.AutomationRunBrief{Status: "completed"}},
			}})
			reply(f, appv1connect.AutomationServiceGetAutomationProcedure, &appv1.GetAutomationResponse{Automation: daily})
			reply(f, appv1connect.AutomationServiceCreateAutomationProcedure, &appv1.CreateAutomationResponse{Automation: daily})
			reply(f, appv1connect.AutomationServiceSetAutomationEnabledProcedure, &appv1.SetAutomationEnabledResponse{Automation: daily})
			reply(f, appv1connect.AutomationServiceArchiveAutomationProcedure, &appv1.ArchiveAutomationResponse{Automation: daily})
			r := f.runWithInput(t, tc.stdin, append([]string{"automations"}, tc.args...)...)
			if r.err != nil {
				t.Fatalf("exit %d: %v", r.code, r.err)
			}
			f.assertRequest(t, tc.procedure, tc.want)
			if tc.wantOut != "" && r.out != tc.wantOut {
				t.Errorf("got\n%s\nwant\n%s", r.out, tc.wantOut)
			}
		})
	}
}

func TestAutomationsCreateNeedsNameAndFile(t *testing.T) {
	f := newFakeAPI(t)
	if r := f.run(t, "automations", "create", "--name", "x"); r.code != 2 {
		t.Fatalf("create without --file: exit %d (%v), want 2", r.code, r.err)
	}
}
