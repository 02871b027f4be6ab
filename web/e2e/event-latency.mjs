// The browser half of cmd/hangar's BenchmarkDashboardEventOnPage: Debian's Chromium, driven by
// playwright-core, keeps one session page open (signed in by the API key in HANGAR_API_KEY,
// stored the way the dashboard stores a pasted key) and answers the benchmark over stdin and
// stdout, one line each:
//   arm <marker>  → "armed": a MutationObserver now waits for <marker> in the conversation
//   wait          → "seen <ms> <arrived ms>": the wall-clock times (ms since the epoch,
//                   sub-millisecond) at which the DOM first showed it, and at which the bytes
//                   of its server-sent event reached the page's JavaScript (a tee of the
//                   events fetch's body), which splits the page's time into network and render
// The benchmark appends the event and times its StreamEvents client itself; both clocks are
// the machine's wall clock, so the two times are comparable.
import { createInterface } from "node:readline";
import { launchChromium } from "./chromium.mjs";

const url = process.env.HANGAR_URL ?? "";
const key = process.env.HANGAR_API_KEY ?? "";
const session = process.env.HANGAR_SESSION ?? "";
if (!url || !key || !session) {
  console.error("run me through cmd/hangar's BenchmarkDashboardEventOnPage");
  process.exit(2);
}

const browser = await launchChromium();
const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
await context.addInitScript((k) => sessionStorage.setItem("hangar.apiKey", k), key);
await context.addInitScript(() => {
  const fetch0 = window.fetch;
  window.fetch = async (input, init) => {
    const resp = await fetch0(input, init);
    if (!String(input).includes("/events") || !resp.body) return resp;
    const [page, spy] = resp.body.tee();
    void (async () => {
      const reader = spy.getReader();
      const text = new TextDecoder();
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        if (window.__marker && !window.__arrived && text.decode(value).includes(window.__marker)) window.__arrived = performance.timeOrigin + performance.now();
      }
    })();
    return new Response(page, { status: resp.status, statusText: resp.statusText, headers: resp.headers });
  };
});
const page = await context.newPage();
await page.goto(`${url}/sessions/${session}`);
await page.getByText("● live").waitFor({ timeout: 60000 });

const say = (line) => process.stdout.write(line + "\n");
say("ready");

for await (const line of createInterface({ input: process.stdin })) {
  const [verb, arg] = line.split(" ");
  if (verb === "arm") {
    await page.evaluate((marker) => {
      window.__marker = marker;
      window.__arrived = 0;
      const list = document.querySelector('[aria-label="Conversation"]');
      window.__seen = new Promise((resolve) => {
        const seen = () => list.textContent.includes(marker);
        const observer = new MutationObserver(() => {
          if (!seen()) return;
          observer.disconnect();
          resolve(performance.timeOrigin + performance.now());
        });
        observer.observe(list, { childList: true, subtree: true, characterData: true });
      });
    }, arg);
    say("armed");
  } else if (verb === "wait") {
    const seen = await page.evaluate(() => window.__seen);
    say(`seen ${seen} ${await page.evaluate(() => window.__arrived)}`);
  } else {
    break;
  }
}
await browser.close();
