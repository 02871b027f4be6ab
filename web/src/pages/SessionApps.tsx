import { useMutation } from "@connectrpc/connect-query";

import { storedKey } from "../api";
import { ErrorView } from "../components/States";
import type { AppEndpoint } from "../gen/svc/app/v1/session_pb";
import { SessionService } from "../gen/svc/app/v1/session_pb";

// liveStatuses are the session states whose sandbox runs, so its apps answer (sessiondb's
// Status.Live); in any other the API refuses an app without waking the session.
const liveStatuses = new Set(["creating", "running", "idle", "snapshotting", "resuming"]);

// SessionApps lists a session's apps (its profile's or CreateSession's `apps`) and, once
// started here, its IDE and browser, each with an Open link to the app's url_path on the API:
// signed in by the dashboard's cookie, that route sends the browser to the app's own origin with
// a fresh single-use token (docs/sessions.md, "Shells, file routes and apps"). The link is a plain
// navigation, never a fetch, so the token is made for the tab that opens it.
export function SessionApps({ sessionId, status, apps }: { sessionId: string; status: string; apps: AppEndpoint[] }) {
  const ide = useMutation(SessionService.method.ensureIde);
  const devtools = useMutation(SessionService.method.ensureBrowser);
  const live = liveStatuses.has(status);
  const started = [ide.data?.endpoint, devtools.data?.endpoint].filter((e): e is AppEndpoint => !!e);
  const all = [...apps, ...started.filter((e) => !apps.some((a) => a.hostname === e.hostname))];
  const failed = [ide, devtools].find((m) => m.isError);
  return (
    <section aria-label="Apps">
      <h2>Apps</h2>
      {!live && <p className="muted">The session is {status}: resume it to open its apps.</p>}
      {live && storedKey() && (
        // The link is a navigation, which carries the dashboard's cookie but never the pasted
        // key (that would put it in the URL): the path route answers it unauthenticated.
        <p className="muted">Open signs in by the dashboard's sign-in, not a pasted API key: sign in to open apps.</p>
      )}
      {all.length === 0 ? (
        <p className="empty">No apps yet.</p>
      ) : (
        <ul aria-label="App endpoints">
          {all.map((a) => (
            <li key={a.hostname}>
              <code>{a.hostname}</code> <span className="muted">port {a.port}</span>{" "}
              {live ? (
                <a href={a.urlPath} target="_blank" rel="noopener noreferrer" aria-label={`Open ${a.hostname}`}>
                  Open
                </a>
              ) : (
                <span className="muted">not running</span>
              )}
              {a.origin && (
                <>
                  <br />
                  <span className="muted app-origin">at {a.origin}</span>
                </>
              )}
            </li>
          ))}
        </ul>
      )}
      <div className="actions">
        <button onClick={() => ide.mutate({ sessionId })} disabled={!live || ide.isPending}>
          {ide.isPending ? "Starting IDE…" : "Start IDE"}
        </button>
        <button onClick={() => devtools.mutate({ sessionId })} disabled={!live || devtools.isPending}>
          {devtools.isPending ? "Starting browser…" : "Start browser"}
        </button>
      </div>
      {failed && <ErrorView error={failed.error} />}
    </section>
  );
}
