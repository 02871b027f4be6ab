package main

import (
	"crypto/sha256"
	"encoding/hex"
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
		{"save a version", []string{"save-version", "auto_1", "--file", defFile}, "", appv1connect.AutomationServiceSaveVersionProcedure,
			&appv1.SaveVersionRequest{AutomationId: "auto_1", DefinitionJson: def}, "automation auto_1 is at version 2\n"},
		{"eval", []string{"eval", "return input.a", "--input", `{"a":1}`}, "", appv1connect.AutomationServiceEvalCodeProcedure,
			&appv1.EvalCodeRequest{Source: "return input.a", Mode: "js", InputJson: `{"a":1}`}, "log: hi\n1\n"},
		{"run now", []string{"run", "auto_1", "--payload-file", inputsFile}, "", appv1connect.AutomationServiceRunNowProcedure,
			&appv1.RunNowRequest{AutomationId: "auto_1", PayloadJson: proto.String(`{"label": "bug"}`)}, "run_1\n"},
		{"dry run", []string{"run", "auto_1", "--dry"}, "", appv1connect.AutomationServiceDryRunProcedure,
			&appv1.DryRunRequest{AutomationId: "auto_1"}, "run_2\n"},
		{"runs", []string{"runs", "auto_1", "--limit", "5"}, "", appv1connect.AutomationRunServiceListRunsProcedure,
			&appv1.ListRunsRequest{AutomationId: "auto_1", Limit: 5},
			"RUN    STATUS     SOURCE            EVENT  CREATED  ERROR\nrun_1  failed     manual            -      -        block b: no\nrun_2  completed  manual (dry run)  -      -        -\n"},
		{"retry from a block", []string{"run-retry", "run_1", "--from", "b"}, "", appv1connect.AutomationRunServiceRetryRunProcedure,
			&appv1.RetryRunRequest{RunId: "run_1", FromStepId: proto.String("b")}, "run_3\n"},
		{"stop", []string{"run-stop", "run_1"}, "", appv1connect.AutomationRunServiceStopRunProcedure,
			&appv1.StopRunRequest{RunId: "run_1"}, "stopping run run_1\n"},
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
			reply(f, appv1connect.AutomationServiceSaveVersionProcedure, &appv1.SaveVersionResponse{Automation: daily})
			reply(f, appv1connect.AutomationServiceEvalCodeProcedure, &appv1.EvalCodeResponse{ValueJson: proto.String("1"), Logs: []string{"hi"}})
			reply(f, appv1connect.AutomationServiceRunNowProcedure, &appv1.RunNowResponse{RunId: "run_1"})
			reply(f, appv1connect.AutomationServiceDryRunProcedure, &appv1.DryRunResponse{RunId: "run_2"})
			reply(f, appv1connect.AutomationRunServiceListRunsProcedure, &appv1.ListRunsResponse{Runs: []*appv1.AutomationRunBrief{
				{Id: "run_1", Status: "failed", TriggerSource: "manual", Error: proto.String("block b: no")},
				{Id: "run_2", Status: "completed", TriggerSource: "manual", DryRun: true},
			}})
			reply(f, appv1connect.AutomationRunServiceRetryRunProcedure, &appv1.RetryRunResponse{RunId: "run_3"})
			reply(f, appv1connect.AutomationRunServiceStopRunProcedure, &appv1.StopRunResponse{Sent: true})
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

func TestAutomationsDraftSaveSavesWhatTheAgentWrote(t *testing.T) {
	const def = `{"version": 1, "entrypoints": [{"id": "go", "type": "manual"}], "blocks": []}`
	sum := sha256.Sum256([]byte(def))
	f := newFakeAPI(t)
	reply(f, appv1connect.AutomationServiceGetAutomationProcedure, &appv1.GetAutomationResponse{
		Automation: &appv1.Automation{Id: "auto_1", Kind: "draft", DraftSessionId: proto.String("sess_draft")},
	})
	serveFile(f, def, uint64(len(def)), hex.EncodeToString(sum[:]))
	reply(f, appv1connect.AutomationServiceSaveVersionProcedure, &appv1.SaveVersionResponse{Automation: &appv1.Automation{Id: "auto_1", CurrentVersion: 2}})
	r := f.runWithInput(t, "", "automations", "draft-save", "auto_1")
	if r.err != nil {
		t.Fatalf("exit %d: %v", r.code, r.err)
	}
	f.assertRequest(t, appv1connect.SessionServiceReadFileProcedure, &appv1.ReadFileRequest{SessionId: "sess_draft", Path: "/draft/automation.json"})
	f.assertRequest(t, appv1connect.AutomationServiceSaveVersionProcedure, &appv1.SaveVersionRequest{AutomationId: "auto_1", DefinitionJson: def})
	if r.out != "saved the draft of session sess_draft: automation auto_1 is at version 2\n" {
		t.Fatalf("out %q", r.out)
	}
}
