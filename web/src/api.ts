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
