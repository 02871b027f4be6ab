// Where a real browser (Debian's Chromium, driven by playwright-core) lands after signing in:
// cmd/hangar's TestSecuritySignInReturnsTheBrowserOnlyToHangar runs a server signing in through
// a loopback OpenID Connect provider (internal/oidctest, which signs HANGAR_EMAIL in at once)
// and runs this file with HANGAR_URL, HANGAR_IDP_URL and HANGAR_EMAIL. Each case navigates a
// fresh browser to /api/auth/login with a return_to an attacker could put in a link; the browser
// follows the provider's redirect and the callback's, and must end on Hangar's origin: on "/"
// for a return_to a browser reads as another host, on its path for a good one. A request to any
// host but loopback is answered here (and counted), so a failing case never leaves the machine.
import { type Browser, type Request } from "playwright-core";
import { launchChromium } from "./chromium.mjs";

const url = process.env.HANGAR_URL ?? "";
const idp = process.env.HANGAR_IDP_URL ?? "";
const email = process.env.HANGAR_EMAIL ?? "";

// Deadlines for a loaded 2-core machine: every wait is on a condition, none is a pause.
const wait = 60000;

// [return_to as written in the link's query, where the browser must land]
const cases: [string, string][] = [
  ["/%09/evil.example", "/"], // a tab, which browsers drop from a Location: "//evil.example"
  ["/%0D%0A/evil.example", "/"], // CR and LF, dropped the same way
  ["//evil.example", "/"], // scheme-relative
  ["/\\evil.example", "/"], // a backslash, which browsers read as a slash
  ["/%5Cevil.example", "/"], // the same, escaped
  ["%2F%2Fevil.example", "/"], // scheme-relative, escaped
  ["https://evil.example", "/"], // absolute
  ["https%3A%2F%2Fevil.example%2F", "/"], // absolute, escaped
  ["/tasks?x=1", "/tasks?x=1"], // a path with a query, as typed
  ["%2Ftasks%3Fx%3D1", "/tasks?x=1"], // the same as the dashboard links it (encodeURIComponent)
];

let browser: Browser;

beforeAll(async () => {
  if (!url || !idp || !email) throw new Error("run me through cmd/hangar's TestSecuritySignInReturnsTheBrowserOnlyToHangar");
  browser = await launchChromium();
});

afterAll(async () => {
  await browser?.close();
});

describe("signing in through the OIDC callback", () => {
  it.each(cases)("with return_to=%s lands on Hangar's %s", async (query, want) => {
    const origin = new URL(url).origin;
    const context = await browser.newContext();
    try {
      const away: string[] = [];
      await context.route(
        (u) => u.hostname !== "127.0.0.1",
        (route) => {
          away.push(route.request().url());
          return route.fulfill({ status: 200, contentType: "text/html", body: "<!doctype html><title>away</title>" });
        },
      );
      const page = await context.newPage();
      page.setDefaultTimeout(wait);
      page.setDefaultNavigationTimeout(wait);

      const res = await page.goto(`${url}/api/auth/login?return_to=${query}`);
      expect(res).not.toBeNull();
      // The way the browser went: Hangar's login, the provider's authorization, Hangar's
      // callback, then the page the callback sent it to.
      const chain: string[] = [];
      for (let r: Request | null = res!.request(); r; r = r.redirectedFrom()) chain.unshift(r.url());
      expect(chain.slice(0, 3).map((u) => new URL(u).origin + new URL(u).pathname)).toEqual([
        `${origin}/api/auth/login`,
        `${new URL(idp).origin}/authorize`,
        `${origin}/api/auth/callback`,
      ]);
      expect(chain).toHaveLength(4);
      const landed = new URL(res!.url());
      expect(landed.origin).toBe(origin);
      expect(landed.pathname + landed.search).toBe(want);
      expect(res!.status()).toBe(200);

      // Signed in there, by the cookie the callback set, and still on Hangar once the page's
      // own scripts have run; nothing went to another host.
      const who = await page.evaluate(async () => {
        const r = await fetch("/api/auth/whoami", { credentials: "same-origin" });
        return { status: r.status, body: await r.json() };
      });
      expect(who.status).toBe(200);
      expect(who.body.email).toBe(email);
      expect(new URL(page.url()).origin).toBe(origin);
      expect(away).toEqual([]);
    } finally {
      await context.close();
    }
  });
});
