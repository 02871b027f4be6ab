import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, createRouterTransport } from "@connectrpc/connect";
import { fireEvent, render, screen } from "@testing-library/react";
import { MemoryRouter } from "react-router-dom";

import { App } from "../App";
import { AutomationSchema, AutomationService, BlockErrorSchema } from "../gen/svc/app/v1/automation_pb";
import { AutomationRunService } from "../gen/svc/app/v1/automation_run_pb";

const valid = '{"version":1,"entrypoints":[{"id":"manual","type":"manual"}],"blocks":[]}';

function renderEditor() {
  const transport = createRouterTransport(({ service }) => {
    service(AutomationService, {
      getAutomation: () => ({
        automation: create(AutomationSchema, {
          id: "auto_1",
          name: "Nightly",
          currentVersion: 1,
          version: { number: 1, definitionJson: valid },
        }),
      }),
      listVersions: () => ({ versions: [{ number: 1, createdAt: "2026-11-25T10:00:00Z" }] }),
      // The server's answer to a draft that does not validate: invalid_argument with one
      // BlockError detail per problem.
      testRender: (req) => {
        if (req.draftDefinitionJson?.includes('"cron"')) {
          throw new ConnectError("definition has 1 problem", Code.InvalidArgument, undefined, [
            { desc: BlockErrorSchema, value: { blockId: "", field: "entrypoints[0].cron", code: "invalid", message: "1:5: bad cron spec" } },
          ]);
        }
        return { blocks: [] };
      },
    });
    service(AutomationRunService, { listRuns: () => ({ runs: [] }) });
  });
  render(
    <MemoryRouter initialEntries={["/automations/auto_1"]}>
      <App transport={transport} />
    </MemoryRouter>,
  );
}

describe("automation editor", () => {
  it("shows each problem of the draft at its field as you type, and clears them when fixed", async () => {
    renderEditor();
    const editor = await screen.findByRole("textbox", { name: "Definition (JSON)" });
    expect((await screen.findByText("✓ Valid")).getAttribute("aria-label")).toBe("Validation");

    fireEvent.change(editor, { target: { value: valid.replace('"manual"}', '"manual","cron":"nope"}') } });
    const problems = await screen.findByRole("list", { name: "Problems" });
    expect(problems.textContent).toContain("entrypoints[0].cron");
    expect(problems.textContent).toContain("1:5: bad cron spec");
    expect((screen.getByRole("button", { name: "Save as version 2" }) as HTMLButtonElement).disabled).toBe(false);

    fireEvent.change(editor, { target: { value: valid } });
    await screen.findByText("✓ Valid");
    expect(screen.queryByRole("list", { name: "Problems" })).toBeNull();
  });
});
