// Who the dashboard is signed in as, through /api/auth (functions/signin): the session cookie
// or the API key pasted into this tab. Tests hand App another Auth.
import { createContext, useContext } from "react";

import { storedKey, storeKey } from "./api";

// Whoami is GET /api/auth/whoami's answer.
export type Whoami = { user_id: string; email?: string; name?: string; kind: string; admin: boolean; key_id?: string; key_name?: string };

export type Auth = {
  // whoami is the caller, or null when neither a cookie nor a key signs it in.
  whoami(): Promise<Whoami | null>;
  // devSignIn says whether this Hangar is `hangar dev` asked from loopback, which signs its local
  // admin in without a provider (POST /api/auth/dev).
  devSignIn(): Promise<boolean>;
  signOut(): Promise<void>;
};

const keyHeaders = (): HeadersInit => {
  const key = storedKey();
  return key ? { "x-api-key": key } : {};
};

export const httpAuth: Auth = {
  async whoami() {
    const res = await fetch("/api/auth/whoami", { headers: keyHeaders(), credentials: "same-origin" });
    if (res.status === 401) return null;
    if (!res.ok) throw new Error(`whoami: HTTP ${res.status}`);
    return (await res.json()) as Whoami;
  },
  async devSignIn() {
    // The route exists only under `hangar dev` and answers only loopback clients: 404 elsewhere.
    const res = await fetch("/api/auth/dev", { method: "HEAD", credentials: "same-origin" });
    return res.ok;
  },
  async signOut() {
    // A pasted key is only forgotten: POST /api/auth/logout would revoke it for every client.
    if (storedKey()) {
      storeKey(null);
      return;
    }
    const res = await fetch("/api/auth/logout", { method: "POST", headers: { "X-Hangar-Csrf": "1" }, credentials: "same-origin" });
    if (!res.ok && res.status !== 401) throw new Error(`sign out: HTTP ${res.status}`);
  },
};

export const AuthContext = createContext<Auth>(httpAuth);
export const useAuth = () => useContext(AuthContext);
