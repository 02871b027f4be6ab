// The dashboard in a real browser (Debian's Chromium, driven by playwright-core) against a real
// `hangar dev`: cmd/hangar's TestDashboardInBrowser starts it and runs this file with
// HANGAR_URL, HANGAR_API_KEY and HANGAR_SCREENSHOTS set. The browser signs in by the session
// cookie as the local admin; the API key drives the API beside it. Each page is saved as a
// screenshot.
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import { writeFileSync } from "node:fs";
import { gzipSync } from "node:zlib";
import { type Browser, type Page } from "playwright-core";
import { launchChromium } from "./chromium.mjs";

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
const sessions = createClient(SessionService, transport);

let browser: Browser;
let page: Page;

beforeAll(async () => {
  if (!url || !key || !image || !shots) throw new Error("run me through cmd/hangar's TestDashboardInBrowser");
  browser = await launchChromium();
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
  let automationId = "";

  it("signs the local admin in by the session cookie, then shows the tasks page first", async () => {
    await page.goto(url + "/");
    await page.getByRole("region", { name: "Sign in" }).waitFor();
    await shot("sign-in");
    await page.getByRole("button", { name: "Sign in as the local admin" }).click();
    await page.getByRole("heading", { name: "Tasks" }).waitFor();
    await page.getByRole("group", { name: "Account" }).getByText("Local admin").waitFor();
    expect(new URL(page.url()).pathname).toBe("/tasks");
    const cookies = await page.context().cookies();
    expect(cookies.find((c) => c.name === "hangar_session")?.httpOnly).toBe(true);
  });

  it("creates a profile and then a task from the UI, and opens the task", async () => {
    await page.goto(`${url}/profiles`);
    const form = page.getByRole("form", { name: "New profile" });
    await form.getByLabel("Name").fill("browser");
    await form.getByLabel("Image").fill(image);
    await form.getByRole("button", { name: "Create profile" }).click();
    await page.getByRole("heading", { name: "browser" }).waitFor();
    await shot("profile");
    await page.goto(`${url}/tasks`);
    const newTask = page.getByRole("form", { name: "New task" });
    await newTask.getByLabel("Profile").selectOption({ label: "browser" });
    await newTask.getByLabel("Title").fill("first from the browser");
    await newTask.getByLabel("Prompt").fill("echo first");
    await newTask.getByRole("button", { name: "Start task" }).click();
    await page.getByRole("heading", { name: "Sessions" }).waitFor();
    taskId = new URL(page.url()).pathname.split("/").at(-1)!;
    expect(taskId).toMatch(/^task_/);
    const link = page.locator('a[href^="/sessions/"]').first();
    sessionId = (await link.getAttribute("href"))!.split("/").at(-1)!;
    await shot("task");
    await page.goto(`${url}/tasks?q=first`);
    await page.getByRole("link", { name: "first from the browser" }).waitFor();
    await shot("tasks");
    await page.setViewportSize({ width: 390, height: 844 });
    await shot("tasks-phone");
    await page.setViewportSize({ width: 1280, height: 800 });
    expect((await tasks.getTask({ taskId })).task!.title).toBe("first from the browser");
  });

  it("shows a session's events as they happen, and runs a prompt typed into it", async () => {
    await page.goto(`${url}/tasks/${taskId}`);
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

  it("downloads a file of the session through ReadFile's stream", async () => {
    for await (const _ of sessions.exec({ sessionId, command: "echo file-from-the-sandbox > /tmp/browser.txt" })) void _;
    const files = page.getByRole("form", { name: "Download a file" });
    await files.getByLabel("Path in the sandbox").fill("/tmp/browser.txt");
    const [download] = await Promise.all([page.waitForEvent("download"), files.getByRole("button", { name: "Download" }).click()]);
    expect(download.suggestedFilename()).toBe("browser.txt");
    const body = await download.createReadStream();
    let text = "";
    for await (const chunk of body) text += chunk;
    expect(text).toBe("file-from-the-sandbox\n");
  });

  it("uploads a file into the session, checked by its sha256", async () => {
    const upload = page.getByRole("form", { name: "Upload a file" });
    await upload.getByLabel("Folder in the sandbox").fill("/tmp");
    await upload.getByLabel("File").setInputFiles({ name: "uploaded.txt", mimeType: "text/plain", buffer: Buffer.from("from the browser\n") });
    await upload.getByRole("button", { name: "Upload" }).click();
    await upload.getByText("Uploaded uploaded.txt.").waitFor();
    let out = "";
    for await (const m of sessions.exec({ sessionId, command: "cat /tmp/uploaded.txt" })) {
      if (m.event.case === "stdout") out += new TextDecoder().decode(m.event.value);
    }
    expect(out).toBe("from the browser\n");
  });

  it("runs a command in the terminal over the shell WebSocket", async () => {
    const terminal = page.getByRole("region", { name: "Terminal" });
    await terminal.getByRole("button", { name: "Open a terminal" }).click();
    await terminal.getByRole("status", { name: "Terminal status" }).filter({ hasText: "connected" }).waitFor();
    await page.locator(".terminal .xterm").click();
    await page.keyboard.type("echo $((6*7))");
    await page.keyboard.press("Enter");
    await terminal.locator(".xterm-rows").getByText("42", { exact: true }).waitFor();
    await shot("terminal");
    await page.keyboard.type("exit 3");
    await page.keyboard.press("Enter");
    await terminal.getByRole("status", { name: "Terminal status" }).filter({ hasText: "exited with status 3" }).waitFor();
  });

  it("takes a checkpoint from the session page", async () => {
    const checkpoints = page.getByRole("region", { name: "Checkpoints" });
    await checkpoints.getByRole("button", { name: "Snapshot" }).click();
    await checkpoints.getByRole("listitem").filter({ hasText: "latest" }).waitFor();
    await shot("checkpoints");
  });

  it("opens a session's app from its page, at the app's own origin, signed in by a single-use token", async () => {
    const { sessionId: appSession } = await sessions.createSession({ imageUri: image, apps: [{ hostname: "web", port: 8080 }] });
    const serve = "mkdir -p /tmp/site && echo hello-from-the-app > /tmp/site/index.html && busybox httpd -p 127.0.0.1:8080 -h /tmp/site >/dev/null 2>&1";
    for await (const _ of sessions.exec({ sessionId: appSession, command: serve })) void _;
    await page.goto(`${url}/sessions/${appSession}`);
    const apps = page.getByRole("region", { name: "Apps" });
    const [tab] = await Promise.all([page.context().waitForEvent("page"), apps.getByRole("link", { name: "Open web" }).click()]);
    await tab.getByText("hello-from-the-app").waitFor();
    const at = new URL(tab.url());
    // The path route sent the tab to the app's origin, whose token became the app's cookie.
    expect(at.hostname).toBe(`web-${appSession.slice("sess_".length)}.apps.localhost`);
    expect(at.search).not.toContain("hangar_app_token");
    expect((await tab.context().cookies(at.origin)).find((c) => c.name === "hangar_app")?.httpOnly).toBe(true);
    await tab.screenshot({ path: `${shots}/app.png` });
    await tab.close();
    await shot("session-apps");
    await sessions.deleteSession({ sessionId: appSession });
  });

  it("creates an automation, edits it until validation passes, runs it and shows the run's steps", async () => {
    await page.goto(`${url}/automations`);
    const form = page.getByRole("form", { name: "New automation" });
    await form.getByLabel("Name").fill("Browser automation");
    await form.getByRole("button", { name: "Create" }).click();
    // Creating checks the code block in the JavaScript sandbox, whose first use compiles it:
    // slow on a busy machine, so a generous deadline.
    await page.getByRole("heading", { name: "Browser automation" }).waitFor({ timeout: 120000 });
    automationId = new URL(page.url()).pathname.split("/").at(-1)!;
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

  it("shows the automation's instances, drops and event samples tabs, and the event catalog", async () => {
    for (const [tab, table] of [["instances", "Instances"], ["drops", "Dropped events"], ["samples", "Event samples"]]) {
      await page.goto(`${url}/automations/${automationId}/${tab}`);
      await page.getByRole("heading", { name: table, exact: true }).waitFor();
      await page.getByText(/^Loading/).waitFor({ state: "hidden" });
      expect(await page.getByRole("alert").count()).toBe(0);
      await shot(`automation-${tab}`);
    }
    // The tabs are links: keyboard focus moves through them in order.
    await page.getByRole("navigation", { name: "Automation" }).getByRole("link", { name: "Definition" }).focus();
    await page.keyboard.press("Tab");
    expect(await page.evaluate(() => document.activeElement?.textContent)).toBe("Instances");
    await page.goto(`${url}/event-catalog?provider=github`);
    await page.getByRole("table", { name: "Events" }).waitFor();
    await shot("event-catalog");
  });

  it("enrolls a repository in reviews with selects, and removes it", async () => {
    await page.goto(`${url}/reviews`);
    await page.getByRole("link", { name: "Enrolled repositories" }).click();
    const form = page.getByRole("form", { name: "Enrollment" });
    await form.getByLabel("Repository").fill("acme/browser");
    await form.getByLabel("Trigger", { exact: true }).selectOption("on_request");
    await form.getByLabel("Autofix", { exact: true }).selectOption("suggest");
    await form.getByLabel("Profile", { exact: true }).selectOption({ label: "browser" });
    await form.getByRole("button", { name: "Enroll" }).click();
    const table = page.getByRole("table", { name: "Review enrollments" });
    await table.getByRole("row").filter({ hasText: "acme/browser" }).filter({ hasText: "On request" }).waitFor();
    await shot("review-enrollments");
    await table.getByRole("button", { name: "Remove" }).click();
    await table.getByRole("button", { name: "Confirm remove" }).click();
    await page.getByText("No repository is enrolled").waitFor();
  });

  it("creates an API key in settings and shows its secret only once", async () => {
    await page.goto(`${url}/settings`);
    const form = page.getByRole("form", { name: "New API key" });
    await form.getByLabel("Name").fill("from the browser");
    await form.getByRole("button", { name: "Create key" }).click();
    const once = page.getByRole("region", { name: "The new API key" });
    const secret = await once.getByLabel("Secret").inputValue();
    expect(secret).toMatch(/^hgr_/);
    await shot("settings-keys-secret");
    // The secret signs in: it is a real key.
    const res = await fetch(`${url}/api/auth/whoami`, { headers: { "x-api-key": secret } });
    expect(((await res.json()) as { key_name: string }).key_name).toBe("from the browser");
    await once.getByRole("button", { name: "I have saved it" }).click();
    const table = page.getByRole("table", { name: "API keys" });
    await table.getByText("from the browser").waitFor();
    expect(await page.locator("body").textContent()).not.toContain(secret);
    await page.reload();
    await page.getByRole("table", { name: "API keys" }).getByText("from the browser").waitFor();
    expect(await page.content()).not.toContain(secret);
  });

  it("puts an org secret whose value is never shown, and adds a webhook", async () => {
    await page.goto(`${url}/settings/secrets`);
    const put = page.getByRole("form", { name: "Put secret" });
    await put.getByLabel("Name").fill("BROWSER_TOKEN");
    await put.getByLabel("Value").fill("value-never-shown");
    await put.getByRole("button", { name: "Save secret" }).click();
    await page.getByRole("table", { name: "Org secrets" }).getByText("BROWSER_TOKEN").waitFor();
    expect(await page.content()).not.toContain("value-never-shown");
    await shot("settings-secrets");
    await page.goto(`${url}/settings/webhooks`);
    const hook = page.getByRole("form", { name: "New webhook" });
    await hook.getByLabel("Name").fill("browser hook");
    await hook.getByRole("button", { name: "Create webhook" }).click();
    await page.getByRole("region", { name: "The signing secret of browser hook" }).waitFor();
    await shot("settings-webhooks");
    for (const tab of ["registries", "oauth"]) {
      await page.goto(`${url}/settings/${tab}`);
      await page.getByRole("form").first().waitFor();
      await page.getByText(/^Loading/).waitFor({ state: "hidden" });
      await shot(`settings-${tab}`);
    }
  });

  it("lists the enabled dev image and follows its enable job", async () => {
    await page.goto(`${url}/images`);
    await page.getByRole("table", { name: "Enabled images" }).waitFor();
    await page.getByRole("table", { name: "Enable jobs" }).getByRole("button").first().click();
    await page.getByRole("region", { name: "Enable job" }).getByRole("list", { name: "Stages" }).waitFor();
    await shot("images");
  });

  it("shows reviews, harnesses and model routers", async () => {
    for (const [path, heading] of [["reviews", "Reviews"], ["harnesses", "Harnesses"], ["model-routers", "Model routers"]]) {
      await page.goto(`${url}/${path}`);
      await page.getByRole("heading", { name: heading, exact: true }).waitFor();
      await page.getByText(/^Loading/).waitFor({ state: "hidden" });
      expect(await page.getByRole("alert").count()).toBe(0);
      await shot(path);
    }
  });

  // The Performance table's numbers: first contentful paint of the tasks page (a fresh load,
  // signed in) and the size of what it loads, gzip-compressed as hangar serves it.
  it("measures the tasks page's first contentful paint and the bundle's gzip size", async () => {
    const paints: number[] = [];
    for (let i = 0; i < 5; i++) {
      const fresh = await browser.newContext({ viewport: { width: 1280, height: 800 }, storageState: await page.context().storageState() });
      const p = await fresh.newPage();
      await p.goto(`${url}/tasks`);
      await p.getByRole("heading", { name: "Tasks" }).waitFor();
      // The paint entry is queued after the frame is presented, which may be after the heading
      // is in the DOM.
      await p.waitForFunction(() => performance.getEntriesByName("first-contentful-paint").length > 0);
      paints.push(await p.evaluate(() => performance.getEntriesByName("first-contentful-paint")[0].startTime));
      await fresh.close();
    }
    const assets = (await (await fetch(`${url}/`)).text()).match(/\/assets\/[^"]+/g) ?? [];
    let gzip = 0;
    for (const a of assets) gzip += gzipSync(Buffer.from(await (await fetch(url + a)).arrayBuffer())).length;
    paints.sort((a, b) => a - b);
    const result = { fcp_ms_median: Math.round(paints[2]), fcp_ms: paints.map(Math.round), bundle_gzip_kb: Math.round(gzip / 102.4) / 10, assets };
    console.log("dashboard performance", JSON.stringify(result));
    writeFileSync(`${shots}/performance.json`, JSON.stringify(result, null, 2));
    expect(paints.every((x) => x > 0)).toBe(true);
  });

  it("shows a Connect error with its code on a page that cannot load", async () => {
    await page.goto(`${url}/tasks/task_does_not_exist`);
    await page.getByRole("alert").waitFor();
    expect(await page.getByRole("alert").textContent()).toMatch(/^not_found: /);
    await shot("not-found");
  });

  it("signs out", async () => {
    await page.goto(`${url}/tasks`);
    await page.getByRole("group", { name: "Account" }).getByRole("button", { name: "Sign out" }).click();
    await page.getByRole("region", { name: "Sign in" }).waitFor();
    await page.reload();
    await page.getByRole("region", { name: "Sign in" }).waitFor();
  });
});
