// The one way the browser tests and the dashboard benchmark start Chromium: Debian's (CHROMIUM
// overrides the path), headless, without its sandbox (the tests run as root in CI), and with no
// background calls home, which this machine's closed network would refuse many at a time.
import { chromium } from "playwright-core";

export function launchChromium() {
  return chromium.launch({
    executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
}
