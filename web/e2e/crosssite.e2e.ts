// The cross-site shell attack in a real browser (Debian's Chromium, driven by playwright-core)
// against a real `hangar dev`: cmd/hangar's TestSecurityCrossSitePagesCannotRunShellCommands
// starts it and runs this file with HANGAR_URL, HANGAR_API_KEY and HANGAR_IMAGE set. The browser
// is signed in to the dashboard by its cookie; a page of another origin (127.0.0.1 on another
// port, the same site, so the browser sends the cookie along; and localhost, another site) sends
// it to the shell route by a navigation and by a WebSocket, with a command that leaves a file.
// Neither may run; the dashboard's own WebSocket does.
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { type Browser, type Page } from "playwright-core";
import { launchChromium } from "./chromium.mjs";

import { SessionService } from "../src/gen/svc/app/v1/session_pb";

const url = process.env.HANGAR_URL ?? "";
const key = process.env.HANGAR_API_KEY ?? "";
const image = process.env.HANGAR_IMAGE ?? "";

const transport = createConnectTransport({
  baseUrl: `${url}/rpc`,
  interceptors: [(next) => (req) => (req.header.set("x-api-key", key), next(req))],
});
const sessions = createClient(SessionService, transport);

let browser: Browser;
let page: Page;
let attacker: Server;
let attackerPort = 0;
let sessionId = "";

// shellURL is the shell route running `touch /tmp/<marker>`, over ws: or http:.
const shellURL = (scheme: "ws" | "http", marker: string) =>
  `${url.replace(/^http/, scheme)}/api/v1/sessions/${sessionId}/shell?` +
  new URLSearchParams([["argv", "sh"], ["argv", "-c"], ["argv", `touch /tmp/${marker}`], ["wake", "1"]]).toString();

// sh runs command in the session under the API key and returns its standard output.
async function sh(command: string): Promise<string> {
  let out = "";
  for await (const m of sessions.exec({ sessionId, command })) {
    if (m.event.case === "stdout") out += new TextDecoder().decode(m.event.value);
  }
  return out;
}

// The attacker's pages: /nav sends the browser to ?to= by a top-level navigation, /ws opens a
// WebSocket to it and puts how it ended in the title.
function attackerPage(path: string, to: string): string {
  const target = JSON.stringify(to);
  if (path === "/nav") return `<!doctype html><script>location.href = ${target};</script>`;
  return `<!doctype html><title>pending</title><script>
    const ws = new WebSocket(${target});
    ws.onopen = () => { document.title = "open"; };
    ws.onclose = (e) => { if (document.title !== "open") document.title = "closed " + e.code; };
  </script>`;
}

beforeAll(async () => {
  if (!url || !key || !image) throw new Error("run me through cmd/hangar's TestSecurityCrossSitePagesCannotRunShellCommands");
  attacker = createServer((req, res) => {
    const u = new URL(req.url ?? "/", "http://attacker");
    res.writeHead(200, { "Content-Type": "text/html" });
    res.end(attackerPage(u.pathname, u.searchParams.get("to") ?? ""));
  });
  await new Promise<void>((resolve) => attacker.listen(0, "127.0.0.1", resolve));
  attackerPort = (attacker.address() as AddressInfo).port;
  browser = await launchChromium();
  page = await browser.newPage();
  await page.goto(url + "/");
  await page.getByRole("button", { name: "Sign in as the local admin" }).click();
  await page.getByRole("heading", { name: "Tasks" }).waitFor();
  ({ sessionId } = await sessions.createSession({ imageUri: image }));
  await sh("true");
});

afterAll(async () => {
  await browser?.close();
  await new Promise((resolve) => attacker?.close(resolve));
});

describe("a page of another origin", () => {
  const markers: string[] = [];
  const origins = () => [`http://127.0.0.1:${attackerPort}`, `http://localhost:${attackerPort}`];

  it("cannot run a command by sending the signed-in browser to the shell route", async () => {
    for (const origin of origins()) {
      const marker = `nav-${markers.length}`;
      markers.push(marker);
      const to = shellURL("http", marker);
      const landed = page.waitForResponse((r) => r.url().startsWith(`${url}/api/v1/sessions/`));
      await page.goto(`${origin}/nav?to=${encodeURIComponent(to)}`);
      const res = await landed;
      expect(res.status()).toBe(426);
      // The browser did send the cookie: the refusal is the route's, not a missing sign-in.
      expect((await res.request().allHeaders())["cookie"]).toContain("hangar_session=");
    }
  });

  it("cannot run a command by opening the shell WebSocket with the browser's cookie", async () => {
    for (const origin of origins()) {
      const marker = `ws-${markers.length}`;
      markers.push(marker);
      await page.goto(`${origin}/ws?to=${encodeURIComponent(shellURL("ws", marker))}`);
      await page.waitForFunction(() => document.title.startsWith("closed") || document.title === "open");
      expect(await page.title()).toMatch(/^closed /);
    }
  });

  it("ran none of them, while the dashboard's own WebSocket runs its command", async () => {
    await page.goto(`${url}/tasks`);
    const got = await page.evaluate(
      (to) =>
        new Promise<string[]>((resolve) => {
          const msgs: string[] = [];
          const ws = new WebSocket(to);
          ws.onmessage = (m) => typeof m.data === "string" && msgs.push(m.data);
          ws.onclose = (e) => resolve([...msgs, `close ${e.code}`]);
        }),
      shellURL("ws", "own-origin"),
    );
    expect(got.at(-1)).toBe("close 1000");
    expect(got.some((m) => m.includes('"type":"exit"'))).toBe(true);
    expect(await sh("test -e /tmp/own-origin && echo present")).toBe("present\n");
    for (const m of markers) expect(await sh(`test -e /tmp/${m} && echo present || echo absent`)).toBe("absent\n");
    // Each shell's start is logged: only the dashboard's happened.
    const opened = await sessions.listSessionEvents({ sessionId, kinds: ["shell.opened"] });
    expect(opened.events.length).toBe(1);
  });
});
