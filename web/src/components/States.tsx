// The three states every page shows the same way: loading, empty and error.
import { useQueryClient } from "@tanstack/react-query";
import { useState, type FormEvent } from "react";

import { describeError, isUnauthenticated, storeKey } from "../api";

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

// SignIn offers the deployment's sign-in (/api/auth/login, which comes back to this page with
// the session cookie) or an API key, when the API refused the call as unauthenticated.
function SignIn() {
  const client = useQueryClient();
  const [key, setKey] = useState("");
  const submit = (e: FormEvent) => {
    e.preventDefault();
    storeKey(key.trim());
    void client.invalidateQueries();
  };
  return (
    <form className="signin" onSubmit={submit} aria-label="Sign in">
      <p>Sign in to see this page.</p>
      <p>
        <a href={"/api/auth/login?return_to=" + encodeURIComponent(location.pathname + location.search)}>Sign in with your account</a>, or
        use an API key:
      </p>
      <label>
        API key
        <input type="password" autoComplete="off" value={key} onChange={(e) => setKey(e.target.value)} required />
      </label>
      <button type="submit">Sign in</button>
    </form>
  );
}
