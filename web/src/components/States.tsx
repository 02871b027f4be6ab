// The three states every page shows the same way: loading, empty and error.
import { useQuery, useQueryClient } from "@tanstack/react-query";
import { useState, type FormEvent } from "react";
import { useLocation } from "react-router-dom";

import { describeError, isUnauthenticated, storeKey } from "../api";
import { useAuth } from "../auth";

export function Loading({ what }: { what: string }) {
  return (
    <p className="muted" role="status">
      Loading {what}…
    </p>
  );
}

export function Empty({ children }: { children: React.ReactNode }) {
  return <p className="empty">{children}</p>;
}

export function ErrorView({ error }: { error: unknown }) {
  if (isUnauthenticated(error)) return <SignIn />;
  const { code, message } = describeError(error);
  return (
    <div className="error" role="alert">
      <strong>{code}</strong>: {message}
    </div>
  );
}

// SignIn is what a page shows when the API refused the call as unauthenticated: under
// `hangar dev` a button that signs the local admin in (a plain form POST to /api/auth/dev, which
// sets the session cookie and comes back here), else the deployment's sign-in
// (/api/auth/login, back with the cookie); and in both cases an API key for this tab.
export function SignIn() {
  const client = useQueryClient();
  const auth = useAuth();
  const dev = useQuery({ queryKey: ["auth", "dev"], queryFn: () => auth.devSignIn(), staleTime: Infinity });
  const [key, setKey] = useState("");
  const at = useLocation();
  const here = at.pathname + at.search;
  const submit = (e: FormEvent) => {
    e.preventDefault();
    storeKey(key.trim());
    void client.invalidateQueries();
  };
  return (
    <div className="signin" role="region" aria-label="Sign in">
      <p>Sign in to see this page.</p>
      {dev.data ? (
        <form method="post" action="/api/auth/dev" aria-label="Local admin">
          <input type="hidden" name="return_to" value={here} />
          <button type="submit" className="primary">
            Sign in as the local admin
          </button>
        </form>
      ) : (
        <p>
          <a href={"/api/auth/login?return_to=" + encodeURIComponent(here)}>Sign in with your account</a>
        </p>
      )}
      <form onSubmit={submit} aria-label="API key sign-in">
        <label>
          Or use an API key
          <input type="password" autoComplete="off" value={key} onChange={(e) => setKey(e.target.value)} required />
        </label>
        <button type="submit">Sign in with the key</button>
      </form>
    </div>
  );
}
