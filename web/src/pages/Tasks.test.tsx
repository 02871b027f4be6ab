import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, createRouterTransport } from "@connectrpc/connect";
import { fireEvent, render, screen, waitFor } from "@testing-library/react";
import { MemoryRouter } from "react-router-dom";

import { App } from "../App";
import { ProfileService } from "../gen/svc/app/v1/profile_pb";
import { TaskSchema, TaskService, type ListTasksRequest } from "../gen/svc/app/v1/task_pb";

const task = (id: string, title: string, status: string) =>
  create(TaskSchema, { id, title, status, type: "agent", createdAt: "2026-11-25T10:00:00.000Z", createdBy: { name: "Ada" } });

function renderAt(path: string, listTasks: (req: ListTasksRequest) => unknown) {
  const seen: ListTasksRequest[] = [];
  const transport = createRouterTransport(({ service }) => {
    service(ProfileService, { listProfiles: () => ({ profiles: [] }) });
    service(TaskService, {
      listTasks(req) {
        seen.push(req);
        return listTasks(req) as never;
      },
    });
  });
  render(
    <MemoryRouter initialEntries={[path]}>
      <App transport={transport} />
    </MemoryRouter>,
  );
  return seen;
}

describe("tasks page", () => {
  it("lists the tasks the API returns, each linking to its page", async () => {
    renderAt("/", () => ({ tasks: [task("task_1", "Fix the login test", "running")], totalCount: 1 }));
    const link = await screen.findByRole("link", { name: "Fix the login test" });
    expect(link.getAttribute("href")).toBe("/tasks/task_1");
    expect(screen.getByText("Page 1 of 1 · 1 tasks")).toBeTruthy();
  });

  it("sends the filters of the URL and resets to page 1 when one changes", async () => {
    const seen = renderAt("/tasks?q=login&state=failed&page=3", () => ({ tasks: [], totalCount: 0 }));
    await screen.findByText(/No tasks match/);
    expect(seen[0]).toMatchObject({ search: "login", states: ["failed"], page: 3, pageSize: 25, scope: "mine" });
    fireEvent.click(screen.getByRole("checkbox", { name: "running" }));
    await waitFor(() => expect(seen.at(-1)).toMatchObject({ states: ["failed", "running"], page: 1 }));
  });

  it("shows a Connect error with its code and message", async () => {
    renderAt("/tasks", () => {
      throw new ConnectError('scope: must be "mine" (the default) or "all"', Code.InvalidArgument);
    });
    const alert = await screen.findByRole("alert");
    expect(alert.textContent).toBe('invalid_argument: scope: must be "mine" (the default) or "all"');
  });

  it("asks for a key when the API says unauthenticated", async () => {
    renderAt("/tasks", () => {
      throw new ConnectError("missing credentials", Code.Unauthenticated);
    });
    expect(await screen.findByRole("region", { name: "Sign in" })).toBeTruthy();
    const signIn = screen.getByRole("link", { name: "Sign in with your account" });
    expect(signIn.getAttribute("href")).toMatch(/^\/api\/auth\/login\?return_to=%2F/);
  });
});
