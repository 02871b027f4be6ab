import { Code, ConnectError } from "@connectrpc/connect";
import { fireEvent, screen, waitFor } from "@testing-library/react";

import { storedKey, storeKey } from "../api";
import type { Auth } from "../auth";
import { TaskService } from "../gen/svc/app/v1/task_pb";
import { renderApp } from "../testing";

const signedOut = (dev: boolean): Auth => ({ whoami: async () => null, devSignIn: async () => dev, signOut: async () => {} });

// The API refuses every call until a key is stored, as it does for a browser with no cookie.
const tasksNeedingAKey = (router: Parameters<Parameters<typeof renderApp>[1]>[0]) =>
  router.service(TaskService, {
    listTasks() {
      if (!storedKey()) throw new ConnectError("missing credentials", Code.Unauthenticated);
      return { tasks: [], totalCount: 0 };
    },
  });

describe("signing in", () => {
  afterEach(() => storeKey(null));

  it("offers hangar dev's local admin as a form that posts to /api/auth/dev and comes back to the page", async () => {
    renderApp("/tasks?state=failed", tasksNeedingAKey, signedOut(true));
    const button = await screen.findByRole("button", { name: "Sign in as the local admin" });
    const form = button.closest("form")!;
    expect(form.getAttribute("method")).toBe("post");
    expect(form.getAttribute("action")).toBe("/api/auth/dev");
    expect((form.querySelector("input[name=return_to]") as HTMLInputElement).value).toBe("/tasks?state=failed");
    expect(screen.queryByRole("link", { name: "Sign in with your account" })).toBeNull();
  });

  it("links to the deployment's sign-in elsewhere, and accepts an API key for this tab", async () => {
    renderApp("/tasks", tasksNeedingAKey, signedOut(false));
    await screen.findByRole("link", { name: "Sign in with your account" });
    fireEvent.change(screen.getByLabelText("Or use an API key"), { target: { value: " hgr_abc.secret " } });
    fireEvent.click(screen.getByRole("button", { name: "Sign in with the key" }));
    await screen.findByText(/No tasks match/);
    expect(storedKey()).toBe("hgr_abc.secret");
  });

  it("shows who is signed in and signs out", async () => {
    let out = false;
    renderApp("/tasks", tasksNeedingAKey, {
      whoami: async () => (out ? null : { user_id: "u1", name: "Local admin", kind: "web_session", admin: true }),
      devSignIn: async () => true,
      signOut: async () => void (out = true),
    });
    const account = await screen.findByRole("group", { name: "Account" });
    expect(account.textContent).toContain("Local admin · admin");
    fireEvent.click(screen.getByRole("button", { name: "Sign out" }));
    await waitFor(() => expect(screen.queryByRole("group", { name: "Account" })).toBeNull());
  });
});
