// The dashboard in a real browser (Debian's Chromium, driven by playwright-core) against a real
// `hangar dev`: cmd/hangar's TestDashboardInBrowser starts it and runs this file with
// HANGAR_URL, HANGAR_API_KEY and HANGAR_SCREENSHOTS set. Each page is saved as a screenshot.
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import { chromium, type Browser, type Page } from "playwright-core";

import { ProfileService } from "../src/gen/svc/app/v1/profile_pb";
import { SessionService } from "../src/gen/svc/app/v1/session_pb";
import { TaskService } from "../src/gen/svc/app/v1/task_pb";

const url = process.env.HANGAR_URL ?? "";
const key = process.env.HANGAR_API_KEY ?? "";
const image = process.env.HANGAR_IMAGE ?? "";
const shots = process.env.HANGAR_SCREENSHOTS ?? "";

const transport = createConnectTransport({
  baseUrl: `${url}/rpc`,
  interceptors: [(next) => (req) => (req.header.set("x-api-key", key), next(req))],
});
const tasks = createClient(TaskService, transport);
const profiles = createClient(ProfileService, transport);
const sessions = createClient(SessionService, transport);

let browser: Browser;
let page: Page;

beforeAll(async () => {
  if (!url || !key || !image || !shots) throw new Error("run me through cmd/hangar's TestDashboardInBrowser");
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
    // This machine's network is closed: no background calls home, no sandbox (root in CI).
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
  page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
});

// A failed test leaves a picture of what the page showed.
afterEach(async (ctx) => {
  if (ctx.task.result?.state === "fail") await page.screenshot({ path: `${shots}/failed-${ctx.task.name.replace(/\W+/g, "-")}.png`, fullPage: true });
});

afterAll(async () => {
  await browser?.close();
});

const shot = (name: string) => page.screenshot({ path: `${shots}/${name}.png`, fullPage: true });

describe("the dashboard", () => {
  let taskId = "";
  let sessionId = "";

  it("asks for a key, then shows the tasks page first", async () => {
    await page.goto(url + "/");
    await page.getByRole("form", { name: "Sign in" }).waitFor();
    await shot("sign-in");
    await page.getByLabel("API key").fill(key);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByRole("heading", { name: "Tasks" }).waitFor();
    expect(new URL(page.url()).pathname).toBe("/tasks");
  });

  it("lists a task created through the API and opens it from a deep link", async () => {
    const profile = await profiles.createProfile({ name: "browser", imageId: image });
    const created = await tasks.createTask({ type: "agent", profileId: profile.profile!.id, prompt: "echo first" });
    taskId = created.task!.id;
    sessionId = created.task!.sessions[0].sessionId;
    await page.goto(`${url}/tasks?q=first`);
    await page.getByRole("link", { name: created.task!.title || created.task!.localTaskName || taskId }).click();
    await page.getByRole("heading", { name: "Sessions" }).waitFor();
    await shot("task");
    expect(new URL(page.url()).pathname).toBe(`/tasks/${taskId}`);
  });

  it("shows a session's events as they happen, and runs a prompt typed into it", async () => {
    await page.getByRole("link", { name: sessionId }).click();
    await page.getByText("● live").waitFor();
    await page.getByText("first", { exact: true }).waitFor();
    // An exec made elsewhere appears on the open page.
    for await (const _ of sessions.exec({ sessionId, command: "echo from-the-api" })) void _;
    await page.getByText("exec.started echo from-the-api").waitFor();
    await page.getByRole("textbox", { name: "Prompt" }).fill("echo hello from the dashboard");
    await page.getByRole("button", { name: /Send|Queue/ }).click();
    await page.getByText("hello from the dashboard", { exact: true }).waitFor();
    await shot("session");
  });

  it("takes a checkpoint from the session page", async () => {
    const checkpoints = page.getByRole("region", { name: "Checkpoints" });
    await checkpoints.getByRole("button", { name: "Snapshot" }).click();
    await checkpoints.getByRole("listitem").filter({ hasText: "latest" }).waitFor();
    await shot("checkpoints");
  });

  it("creates an automation, edits it until validation passes, runs it and shows the run's steps", async () => {
    await page.goto(`${url}/automations`);
    const form = page.getByRole("form", { name: "New automation" });
    await form.getByLabel("Name").fill("Browser automation");
    await form.getByRole("button", { name: "Create" }).click();
    // Creating checks the code block in the JavaScript sandbox, whose first use compiles it:
    // slow on a busy machine, so a generous deadline.
    await page.getByRole("heading", { name: "Browser automation" }).waitFor({ timeout: 120000 });
    const editor = page.getByRole("textbox", { name: "Definition (JSON)" });
    const definition = await editor.inputValue();
    await editor.fill(definition.replace('"type": "code"', '"type": "nope"'));
    await page.getByRole("list", { name: "Problems" }).waitFor();
    await shot("automation-invalid");
    await editor.fill(definition.replace("hello from an automation", "edited in the browser"));
    await page.getByText("✓ Valid").waitFor();
    await page.getByRole("button", { name: "Save as version 2" }).click();
    await page.getByRole("heading", { name: "Definition · version 2" }).waitFor();
    await page.getByRole("button", { name: "Run now" }).click();
    await page.getByText("Started").getByRole("link").click();
    const step = page.getByRole("list", { name: "Steps" }).getByRole("listitem").filter({ hasText: "hello" });
    await step.filter({ hasText: "succeeded" }).waitFor({ timeout: 90000 });
    await shot("run");
  });

  it("shows a Connect error with its code on a page that cannot load", async () => {
    await page.goto(`${url}/tasks/task_does_not_exist`);
    await page.getByRole("alert").waitFor();
    expect(await page.getByRole("alert").textContent()).toMatch(/^not_found: /);
    await shot("not-found");
  });
});
