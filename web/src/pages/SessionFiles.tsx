import { createClient } from "@connectrpc/connect";
import { useMutation, useTransport } from "@connectrpc/connect-query";
import { useMutation as useTask } from "@tanstack/react-query";
import { useState, type FormEvent } from "react";

import { httpError, routeHeaders } from "../api";
import { ErrorView } from "../components/States";
import type { SessionEvent } from "../events";
import { SessionService } from "../gen/svc/app/v1/session_pb";

// saveStream collects a server stream's chunk frames into a file the browser saves; frames
// with a metadata case name the file (ReadFile and GetArtifact share this shape).
export async function saveStream(
  frames: AsyncIterable<{ frame?: { case: string | undefined; value?: unknown }; msg?: { case: string | undefined; value?: unknown } }>,
  fallbackName: string,
  save: (blob: Blob, name: string) => void = download,
): Promise<number> {
  const parts: Uint8Array<ArrayBuffer>[] = [];
  let name = fallbackName;
  let type = "application/octet-stream";
  for await (const f of frames) {
    const one = f.frame ?? f.msg;
    if (one?.case === "chunk") parts.push(new Uint8Array(one.value as Uint8Array));
    else if (one?.case === "metadata") {
      const m = one.value as { fileName?: string; mediaType?: string };
      if (m.fileName) name = m.fileName;
      if (m.mediaType) type = m.mediaType;
    }
  }
  const blob = new Blob(parts, { type });
  save(blob, name);
  return blob.size;
}

function download(blob: Blob, name: string) {
  const url = URL.createObjectURL(blob);
  const a = document.createElement("a");
  a.href = url;
  a.download = name;
  a.click();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}

// Files downloads a file of the session by path (ReadFile, streamed), saves one as an
// artifact, and lists the session's artifacts (its artifact.created events) for download.
export function Files({ sessionId, artifacts: created }: { sessionId: string; artifacts: SessionEvent[] }) {
  const transport = useTransport();
  const client = createClient(SessionService, transport);
  const [path, setPath] = useState("");
  const fetchFile = useTask({
    mutationFn: (p: string) => saveStream(client.readFile({ sessionId, path: p }), p.split("/").pop() || "file"),
  });
  const fetchArtifact = useTask({
    mutationFn: (a: { id: string; name: string }) => saveStream(client.getArtifact({ sessionId, artifactId: a.id }), a.name),
  });
  const keep = useMutation(SessionService.method.createArtifactFromPath);
  const artifacts = created.map((e) => e.payload as { artifact_id?: string; file_name?: string; path?: string; size_bytes?: number; caption?: string });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    fetchFile.mutate(path);
  };
  return (
    <section aria-label="Files">
      <h2>Files</h2>
      <form onSubmit={submit} className="editor" aria-label="Download a file">
        <label>
          Path in the sandbox
          <input className="code" value={path} onChange={(e) => setPath(e.target.value)} required placeholder="/workspace/out.txt" />
        </label>
        <div className="actions">
          <button type="submit" disabled={fetchFile.isPending}>
            Download
          </button>
          <button type="button" disabled={!path || keep.isPending} onClick={() => keep.mutate({ sessionId, path })}>
            Save as artifact
          </button>
        </div>
        {fetchFile.data !== undefined && <p role="status">Downloaded {fetchFile.data} bytes.</p>}
        {fetchFile.isError && <ErrorView error={fetchFile.error} />}
        {keep.isError && <ErrorView error={keep.error} />}
      </form>
      <Upload sessionId={sessionId} />
      <h3>Artifacts</h3>
      {artifacts.length === 0 ? (
        <p className="empty">No artifacts yet.</p>
      ) : (
        <ul aria-label="Artifacts">
          {artifacts.map((a) => (
            <li key={a.artifact_id}>
              <button
                type="button"
                className="link"
                disabled={fetchArtifact.isPending}
                onClick={() => fetchArtifact.mutate({ id: a.artifact_id ?? "", name: a.file_name ?? "artifact" })}
              >
                {a.file_name || a.path}
              </button>{" "}
              <span className="muted">
                {a.size_bytes !== undefined && `${a.size_bytes} bytes`}
                {a.caption && ` · ${a.caption}`}
              </span>
            </li>
          ))}
        </ul>
      )}
      {fetchArtifact.isError && <ErrorView error={fetchArtifact.error} />}
    </section>
  );
}

// hex is a digest as lowercase hex.
const hex = (b: ArrayBuffer) => Array.from(new Uint8Array(b), (x) => x.toString(16).padStart(2, "0")).join("");

// uploadFile PUTs a file to the session's file route with its sha256, which the server checks
// before the file appears (a damaged upload writes nothing).
export async function uploadFile(sessionId: string, path: string, file: Blob, doFetch: typeof fetch = fetch): Promise<void> {
  const sum = hex(await crypto.subtle.digest("SHA-256", await file.arrayBuffer()));
  const route = `/api/v1/sessions/${encodeURIComponent(sessionId)}/files/${path.replace(/^\/+/, "").split("/").map(encodeURIComponent).join("/")}`;
  const resp = await doFetch(route, {
    method: "PUT",
    body: file,
    credentials: "same-origin",
    headers: { ...routeHeaders(), "X-Hangar-Sha256": sum, "Content-Type": "application/octet-stream" },
  });
  if (!resp.ok) throw await httpError(resp);
}

function Upload({ sessionId }: { sessionId: string }) {
  const [file, setFile] = useState<File | null>(null);
  const [dir, setDir] = useState("/root");
  const upload = useTask({ mutationFn: (f: File) => uploadFile(sessionId, `${dir.replace(/\/+$/, "")}/${f.name}`, f) });
  return (
    <form
      className="editor"
      aria-label="Upload a file"
      onSubmit={(e) => {
        e.preventDefault();
        if (file) upload.mutate(file);
      }}
    >
      <label>
        Folder in the sandbox
        <input className="code" value={dir} onChange={(e) => setDir(e.target.value)} required />
      </label>
      <label>
        File
        <input type="file" onChange={(e) => setFile(e.target.files?.[0] ?? null)} required />
      </label>
      <button type="submit" disabled={!file || upload.isPending}>
        Upload
      </button>
      {upload.isSuccess && file && <p role="status">Uploaded {file.name}.</p>}
      {upload.isError && <ErrorView error={upload.error} />}
    </form>
  );
}
