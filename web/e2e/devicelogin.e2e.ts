// A `hangar login` approved from a real browser (Debian's Chromium, driven by playwright-core):
// cmd/hangar's TestSecurityDeviceLoginCompletesFromARealBrowser runs a real `hangar login`
// against a server composed as `hangar dev` composes it, and runs this file with HANGAR_URL,
// HANGAR_DEVICE_URL (the address the CLI printed) and HANGAR_USER_CODE (the code it printed).
// The browser, not signed in, opens that address, is sent through the standalone dev sign-in
// page, signs in by its button, enters the code and approves it: clicks on Hangar's own forms,
// whose posts must carry Hangar's origin (under the pages' former Referrer-Policy no-referrer,
// Chromium sent "Origin: null" and the CSRF check refused them).
import { type Browser, type Page, type Request } from "playwright-core";
import { launchChromium } from "./chromium.mjs";

const url = process.env.HANGAR_URL ?? "";
const deviceURL = process.env.HANGAR_DEVICE_URL ?? "";
const code = process.env.HANGAR_USER_CODE ?? "";

// Deadlines for a loaded 2-core machine: every wait is on a condition, none is a pause.
const wait = 60000;

let browser: Browser;

beforeAll(async () => {
  if (!url || !deviceURL || !code) throw new Error("run me through cmd/hangar's TestSecurityDeviceLoginCompletesFromARealBrowser");
  browser = await launchChromium();
});

afterAll(async () => {
  await browser?.close();
});

// submit clicks a form's button and answers the POST it sent to path.
async function submit(page: Page, path: string, button: string): Promise<Request> {
  const [post] = await Promise.all([
    page.waitForRequest((r) => r.method() === "POST" && new URL(r.url()).pathname === path),
    page.getByRole("button", { name: button, exact: true }).click(),
  ]);
  return post;
}

describe("hangar login's device page", () => {
  it("signs in through the dev page and approves the code, each post from Hangar's origin", async () => {
    const origin = new URL(url).origin;
    const page = await browser.newPage();
    page.setDefaultTimeout(wait);
    page.setDefaultNavigationTimeout(wait);

    // Not signed in: the device page sends the browser to sign in, which under `hangar dev`
    // is the standalone dev page, with the device page to come back to.
    await page.goto(deviceURL);
    await page.waitForURL((u) => u.pathname === "/api/auth/dev");
    expect(new URL(page.url()).searchParams.get("return_to")).toBe("/api/auth/device");
    await page.getByRole("button", { name: "Sign in as the local admin" }).waitFor();
    const signIn = await submit(page, "/api/auth/dev", "Sign in as the local admin");
    expect(await signIn.headerValue("origin")).toBe(origin);

    // Signed in, back on the device page: enter the code as the CLI showed it.
    await page.getByRole("heading", { name: "Sign in hangar on a machine" }).waitFor();
    expect(new URL(page.url()).pathname).toBe("/api/auth/device");
    await page.getByRole("textbox").fill(code);
    await page.getByRole("button", { name: "Continue" }).click();

    await page.getByRole("heading", { name: "Approve this login?" }).waitFor();
    await page.locator("code", { hasText: code }).waitFor();
    const approve = await submit(page, "/api/auth/device", "Approve");
    expect(await approve.headerValue("origin")).toBe(origin);
    await page.getByRole("heading", { name: "Approved", exact: true }).waitFor();
    await page.getByText("is signed in. You can close this page.").waitFor();
  });
});
