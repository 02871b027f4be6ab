import { useState } from "react";

// SecretOnce shows a secret the API answers only once (a new API key, a webhook's signing
// secret): selectable, copyable, and gone once dismissed, since nothing can show it again.
export function SecretOnce({ label, secret, onDone }: { label: string; secret: string; onDone: () => void }) {
  const [copied, setCopied] = useState(false);
  const copy = async () => {
    await navigator.clipboard?.writeText(secret);
    setCopied(true);
  };
  return (
    <div className="secret-once" role="region" aria-label={label}>
      <p>
        <strong>{label}</strong> — copy it now: it is shown only this once.
      </p>
      <label>
        Secret
        <input className="code" readOnly value={secret} onFocus={(e) => e.target.select()} />
      </label>
      <div className="actions">
        <button type="button" onClick={() => void copy()}>
          {copied ? "Copied" : "Copy"}
        </button>
        <button type="button" onClick={onDone}>
          I have saved it
        </button>
      </div>
    </div>
  );
}
