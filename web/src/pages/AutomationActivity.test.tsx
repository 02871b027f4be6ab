import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, type ServiceImpl } from "@connectrpc/connect";
import { fireEvent, screen, waitFor, within } from "@testing-library/react";

import { AutomationSchema, AutomationService, type DryRunRequest, type ListEventCatalogRequest } from "../gen/svc/app/v1/automation_pb";
import { AutomationInstanceSchema, AutomationRunService, type AutomationInstance, type CloseInstanceRequest } from "../gen/svc/app/v1/automation_run_pb";
import { renderApp } from "../testing";

const automation = create(AutomationSchema, { id: "auto_1", name: "Triage", currentVersion: 1, version: { number: 1, definitionJson: "{}" } });

function renderTab(path: string, more: Partial<ServiceImpl<typeof AutomationRunService>> = {}) {
  const closed: CloseInstanceRequest[] = [];
  const dry: DryRunRequest[] = [];
  const catalogs: ListEventCatalogRequest[] = [];
  const instances: AutomationInstance[] = [
    create(AutomationInstanceSchema, { id: "inst_1", automationId: "auto_1", key: "acme/app#7", status: "open", openedBy: "webhook", openedAt: "2026-11-25T10:00:00Z", inputsJson: '{"pr":7}' }),
  ];
  renderApp(path, (r) => {
    r.service(AutomationService, {
      getAutomation: () => ({ automation }),
      listEventSamples: (req) => ({
        samples: [
          { id: "smp_1", eventKey: "github.pull_request.opened", payloadJson: '{"number":7}', receivedAt: "2026-11-25T10:00:00Z" },
          { id: "smp_2", eventKey: "github.push", payloadJson: '{"ref":"main"}', receivedAt: "2026-11-25T09:00:00Z" },
        ].filter((s) => !req.eventKey || s.eventKey === req.eventKey),
      }),
      dryRun: (req) => (dry.push(req), { runId: "run_dry" }),
      listEventCatalog: (req) => {
        catalogs.push(req);
        if (req.provider === "nope") throw new ConnectError('"nope" is not a provider', Code.InvalidArgument);
        return {
          events: [
            { key: "webhook.received", label: "Received", description: "Any signed delivery", schemaJson: '{"type":"object"}', sampleJson: '{"a":1}', observed: true },
            { key: "webhook.internal", label: "Internal", hidden: true },
          ],
          variables: [{ path: "body.ref", alias: "ref" }],
        };
      },
    });
    r.service(AutomationRunService, {
      listInstances: (req) => ({ instances: instances.filter((i) => req.includeClosed || !i.closedAt) }),
      getInstance: (req) => ({ instance: instances.find((i) => i.id === req.id), handles: [{ handle: "pr-7", writtenBy: "block:open", createdAt: "2026-11-25T10:00:01Z" }] }),
      closeInstance: (req) => {
        closed.push(req);
        instances[0] = create(AutomationInstanceSchema, { ...instances[0], status: "closed", closedAt: "2026-11-25T11:00:00Z", closeReason: req.reason });
        return { closed: true };
      },
      listRuns: (req) => ({ runs: req.instanceId ? [{ id: "run_9", automationId: "auto_1", version: 1, status: "completed" }] : [] }),
      listRecentDrops: () => ({ drops: [{ entrypointId: "gh", eventKey: "github.push", reason: "filtered", detail: "branch is not main", droppedAt: "2026-11-25T10:00:00Z" }] }),
      ...more,
    });
  });
  return { closed, dry, catalogs };
}

describe("automation activity tabs", () => {
  it("lists open instances, shows one by its link with handles and runs, and closes it after a confirmation", async () => {
    const { closed } = renderTab("/automations/auto_1/instances?instance=inst_1");
    const detail = await screen.findByRole("region", { name: "Instance" });
    expect((await within(detail).findByRole("table", { name: "Handles" })).textContent).toContain("pr-7");
    expect((await within(detail).findByRole("table", { name: "Instance runs" })).textContent).toContain("run_9");
    const table = await screen.findByRole("table", { name: "Instances" });
    expect(table.textContent).toContain("acme/app#7");
    fireEvent.click(within(table).getByRole("button", { name: "Close" }));
    fireEvent.click(within(table).getByRole("button", { name: "Confirm close" }));
    await screen.findByText("No open instances.");
    expect(closed).toEqual([expect.objectContaining({ id: "inst_1" })]);
    fireEvent.click(screen.getByRole("checkbox", { name: "Show closed" }));
    expect((await screen.findByRole("table", { name: "Instances" })).textContent).toContain("closed from the dashboard");
  });

  it("shows a Connect error with its code when instances cannot be listed", async () => {
    renderTab("/automations/auto_1/instances", {
      listInstances: () => {
        throw new ConnectError("automation auto_1 not found", Code.NotFound);
      },
    });
    expect((await screen.findByRole("alert")).textContent).toBe("not_found: automation auto_1 not found");
  });

  it("lists dropped events with the reason", async () => {
    renderTab("/automations/auto_1/drops");
    const table = await screen.findByRole("table", { name: "Dropped events" });
    expect(table.textContent).toContain("filtered");
    expect(table.textContent).toContain("branch is not main");
  });

  it("filters samples by the event in the URL and dry-runs one", async () => {
    const { dry } = renderTab("/automations/auto_1/samples?event=github.push");
    const table = await screen.findByRole("table", { name: "Event samples" });
    expect(table.textContent).toContain("github.push");
    expect(table.textContent).not.toContain("pull_request");
    expect((screen.getByRole("combobox", { name: "Event" }) as HTMLSelectElement).value).toBe("github.push");
    fireEvent.click(within(table).getByRole("button", { name: "Dry run" }));
    expect(await screen.findByRole("link", { name: "run_dry" })).toBeTruthy();
    expect(dry[0]).toMatchObject({ automationId: "auto_1", sample: { case: "sampleId", value: "smp_2" } });
  });

  it("lists the event catalog of the provider in the URL, hiding hidden events until asked", async () => {
    const { catalogs } = renderTab("/event-catalog?provider=webhook");
    const table = await screen.findByRole("table", { name: "Events" });
    expect(catalogs[0].provider).toBe("webhook");
    expect(table.textContent).toContain("webhook.received");
    expect(table.textContent).toContain("yes");
    expect(table.textContent).not.toContain("webhook.internal");
    expect(screen.getByRole("list", { name: "Webhook variables" }).textContent).toContain("body.ref");
    fireEvent.click(screen.getByRole("checkbox", { name: "Show hidden events" }));
    await waitFor(() => expect(screen.getByRole("table", { name: "Events" }).textContent).toContain("webhook.internal"));
  });

  it("shows the catalog's refusal of an unknown provider", async () => {
    renderTab("/event-catalog?provider=nope");
    expect((await screen.findByRole("alert")).textContent).toBe('invalid_argument: "nope" is not a provider');
  });
});
