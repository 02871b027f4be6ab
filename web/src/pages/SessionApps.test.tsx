import { Code, ConnectError, createRouterTransport } from "@connectrpc/connect";
import { TransportProvider } from "@connectrpc/connect-query";
import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { fireEvent, render, screen, within } from "@testing-library/react";
import { create } from "@bufbuild/protobuf";

import { storeKey } from "../api";
import { AppEndpointSchema, SessionService } from "../gen/svc/app/v1/session_pb";
import { SessionApps } from "./SessionApps";

const origin = (name: string) => `http://${name}-01jz0000000000000000000000.apps.localhost:8080`;
const endpoint = (hostname: string, port: number) =>
  create(AppEndpointSchema, { hostname, port, urlPath: `/api/v1/sessions/sess_1/apps/${hostname}/`, origin: origin(hostname) });

function renderApps(status: string, ensured: string[]) {
  const transport = createRouterTransport((r) =>
    r.service(SessionService, {
      ensureIde: (req) => (ensured.push(`ide ${req.sessionId}`), { port: 13337, endpoint: endpoint("ide", 13337) }),
      ensureBrowser: () => {
        throw new ConnectError("the image has no headless Chromium (looked for chromium, google-chrome)", Code.FailedPrecondition);
      },
    }),
  );
  const client = new QueryClient({ defaultOptions: { queries: { retry: false } } });
  return render(
    <TransportProvider transport={transport}>
      <QueryClientProvider client={client}>
        <SessionApps sessionId="sess_1" status={status} apps={[endpoint("web", 8080)]} />
      </QueryClientProvider>
    </TransportProvider>,
  );
}

describe("a session's apps", () => {
  it("opens each app through its url_path in a new tab, and the IDE once started", async () => {
    const ensured: string[] = [];
    renderApps("running", ensured);
    const apps = screen.getByRole("region", { name: "Apps" });
    const web = within(apps).getByRole("link", { name: "Open web" });
    // The path route on the API's origin, which redirects with a fresh token: never the origin
    // itself, which the dashboard's cookie does not reach.
    expect(web.getAttribute("href")).toBe("/api/v1/sessions/sess_1/apps/web/");
    expect(web.getAttribute("target")).toBe("_blank");
    expect(web.getAttribute("rel")).toContain("noopener");
    expect(within(apps).getByText(`at ${origin("web")}`)).toBeTruthy();

    fireEvent.click(within(apps).getByRole("button", { name: "Start IDE" }));
    const ide = await within(apps).findByRole("link", { name: "Open ide" });
    expect(ide.getAttribute("href")).toBe("/api/v1/sessions/sess_1/apps/ide/");
    expect(ensured).toEqual(["ide sess_1"]);

    fireEvent.click(within(apps).getByRole("button", { name: "Start browser" }));
    expect((await within(apps).findByRole("alert")).textContent).toContain("no headless Chromium");
  });

  it("says Open needs the dashboard's sign-in when the tab uses a pasted API key", () => {
    storeKey("hgr_pasted_key");
    try {
      renderApps("running", []);
      expect(within(screen.getByRole("region", { name: "Apps" })).getByText(/not a pasted API key/)).toBeTruthy();
    } finally {
      storeKey(null);
    }
  });

  it("offers no Open link while the session is not running", () => {
    renderApps("stopped", []);
    const apps = screen.getByRole("region", { name: "Apps" });
    expect(within(apps).queryByRole("link")).toBeNull();
    expect(within(apps).getByText("The session is stopped: resume it to open its apps.")).toBeTruthy();
    expect((within(apps).getByRole("button", { name: "Start IDE" }) as HTMLButtonElement).disabled).toBe(true);
  });
});
