// The dashboard's one way to the API: Connect over fetch to /rpc on the same origin, carrying
// the sign-in cookie, or an API key the user pasted (kept for this tab only).
import { Code, ConnectError, type Interceptor, type Transport } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";

const keyItem = "hangar.apiKey";

export function storedKey(): string | null {
  return sessionStorage.getItem(keyItem);
}

export function storeKey(key: string | null) {
  if (key) sessionStorage.setItem(keyItem, key);
  else sessionStorage.removeItem(keyItem);
}

const withKey: Interceptor = (next) => async (req) => {
  const key = storedKey();
  if (key) req.header.set("x-api-key", key);
  return next(req);
};

export function newTransport(origin = location.origin): Transport {
  return createConnectTransport({
    baseUrl: new URL("/rpc", origin).toString(),
    interceptors: [withKey],
    fetch: (input, init) => fetch(input, { ...init, credentials: "same-origin" }),
  });
}

// describeError is what an error view shows: the Connect code's name and the server's message.
export function describeError(err: unknown): { code: string; message: string } {
  const ce = ConnectError.from(err);
  return { code: Code[ce.code].replace(/([a-z])([A-Z])/g, "$1_$2").toLowerCase(), message: ce.rawMessage };
}

export function isUnauthenticated(err: unknown): boolean {
  return ConnectError.from(err).code === Code.Unauthenticated;
}

// httpError turns a plain HTTP route's refusal (the RPCs' JSON error body: code and message)
// into the ConnectError every page shows the same way.
export async function httpError(resp: Response): Promise<ConnectError> {
  let body: { code?: string; message?: string } = {};
  try {
    body = await resp.json();
  } catch {
    body = { message: `${resp.status} ${resp.statusText}` };
  }
  const name = (body.code ?? "").replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());
  const key = Object.keys(Code).find((k) => k.toLowerCase() === name.toLowerCase()) as keyof typeof Code | undefined;
  return new ConnectError(body.message ?? resp.statusText, key ? Code[key] : Code.Unknown);
}

// routeHeaders are what a plain HTTP route of the API needs from the dashboard: the pasted key
// when there is one, and the header a cross-site form cannot send (with the sign-in cookie,
// the server's CSRF check asks for it on anything but GET).
export function routeHeaders(): Record<string, string> {
  const h: Record<string, string> = { "X-Hangar-Csrf": "1" };
  const key = storedKey();
  if (key) h["x-api-key"] = key;
  return h;
}
