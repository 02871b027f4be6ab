import { useMutation, useQuery } from "@connectrpc/connect-query";
import { useEffect, useRef, useState } from "react";
import { useSearchParams } from "react-router-dom";

import { ConfirmButton } from "../components/ConfirmButton";
import { CreateForm, ListWithCreate, When } from "../components/ListWithCreate";
import { Loaded } from "../components/Loaded";
import { ErrorView } from "../components/States";
import { ImageService, type EnableJob } from "../gen/svc/app/v1/image_pb";

// The enable job's stages in order (functions/imagesvc/states.go); warming runs only for an
// image with a warm command.
export const stages = ["queued", "resolving", "pulling", "chunking", "prestaging", "warming", "ready"];
const ended = (state?: string) => state === "ready" || state === "failed" || state === "superseded";

// ImagesPage lists enabled images (refresh, disable) and enable jobs, enables an image, and
// follows one job live; the followed job is in the URL (?job=), so its progress is a link.
export function ImagesPage() {
  const [params, setParams] = useSearchParams();
  const jobId = params.get("job") ?? "";
  const follow = (id: string) => setParams(id ? { job: id } : {});
  const images = useQuery(ImageService.method.listEnabledImages, {});
  const jobs = useQuery(ImageService.method.listEnableJobs, {}, { refetchInterval: 5000 });
  const onJob = { onSuccess: (res: { job?: EnableJob }) => (res.job && follow(res.job.id), void jobs.refetch()) };
  const refresh = useMutation(ImageService.method.refreshImage, onJob);
  const disable = useMutation(ImageService.method.disableImage, { onSuccess: () => void images.refetch() });
  return (
    <section>
      <h1>Images</h1>
      <EnableForm onStarted={(job) => (follow(job.id), void jobs.refetch())} />
      {jobId && <JobProgress key={jobId} jobId={jobId} onReady={() => void images.refetch()} />}
      <ListWithCreate
        title="Enabled images"
        errors={[refresh.error, disable.error]}
        query={images}
        what="images"
        rows={(d) => d.images}
        rowKey={(i) => i.id}
        empty="No enabled images yet."
        columns={[
          {
            header: "Image",
            cell: (i) => (
              <>
                <code>{i.imageUri}</code>
                {i.config?.name && <div className="muted">{i.config.name}</div>}
              </>
            ),
          },
          { header: "Id", cell: (i) => <code>{i.id}</code> },
          { header: "Digest", cell: (i) => <code title={i.manifestDigest}>{i.manifestDigest.slice(0, 19)}</code> },
          { header: "Refreshed", cell: (i) => <When at={i.lastRefreshedAt} /> },
          {
            header: "",
            className: "actions",
            cell: (i) => (
              <>
                <button type="button" disabled={refresh.isPending} onClick={() => refresh.mutate({ imageUri: i.imageUri })}>
                  Refresh
                </button>
                <ConfirmButton label="Disable" disabled={disable.isPending} onConfirm={() => disable.mutate({ imageUri: i.imageUri })} />
              </>
            ),
          },
        ]}
      />
      <ListWithCreate
        title="Enable jobs"
        query={jobs}
        what="jobs"
        rows={(d) => d.jobs}
        rowKey={(j) => j.id}
        empty="No enable jobs."
        columns={[
          {
            header: "Job",
            cell: (j) => (
              <button type="button" className="link" onClick={() => follow(j.id)}>
                {j.id}
              </button>
            ),
          },
          { header: "Image", cell: (j) => <code>{j.imageUri}</code> },
          { header: "State", cell: (j) => <span className={`status status-${statusClass(j.state)}`}>{j.state}</span> },
        ]}
      />
    </section>
  );
}

const statusClass = (state: string) => (state === "ready" ? "completed" : state === "failed" ? "failed" : state === "superseded" ? "cancelled" : "running");

function EnableForm({ onStarted }: { onStarted: (job: EnableJob) => void }) {
  const [uri, setUri] = useState("");
  const [name, setName] = useState("");
  const [warm, setWarm] = useState("");
  const enable = useMutation(ImageService.method.enableImage, { onSuccess: (res) => res.job && onStarted(res.job) });
  const submit = () => enable.mutate({ imageUri: uri, config: { name, warm: warm ? { command: ["sh", "-c", warm] } : undefined } });
  return (
    <CreateForm title="Enable an image" submitLabel="Enable" call={enable} onSubmit={submit}>
      <label>
        Image
        <input value={uri} onChange={(e) => setUri(e.target.value)} required placeholder="ghcr.io/org/agent:latest" />
      </label>
      <label>
        Name
        <input value={name} onChange={(e) => setName(e.target.value)} />
      </label>
      <label>
        Warm command (optional)
        <input className="code" value={warm} onChange={(e) => setWarm(e.target.value)} placeholder="npm ci" />
      </label>
    </CreateForm>
  );
}

// JobProgress follows an enable job by polling GetEnableJob until it ends: its stages, the
// chunks bar while chunking, the warm command's output tail, and retry when it failed.
export function JobProgress({ jobId, onReady }: { jobId: string; onReady?: () => void }) {
  const got = useQuery(ImageService.method.getEnableJob, { jobId }, { refetchInterval: (q) => (ended(q.state.data?.job?.state) ? false : 1000) });
  const retry = useMutation(ImageService.method.retryEnableJob, { onSuccess: () => void got.refetch() });
  const j = got.data?.job;
  const ready = j?.state === "ready";
  const readyRef = useRef(onReady);
  readyRef.current = onReady;
  useEffect(() => {
    if (ready) readyRef.current?.();
  }, [ready]);
  return (
    <section className="job" aria-label="Enable job">
      <h2>
        Job <code>{jobId}</code>
      </h2>
      <Loaded query={got} what="the job">
        {() => {
          const job = j!;
          const failedAt = job.state === "failed" ? (job.error ?? "").split(":")[0] : "";
          const at = stages.indexOf(job.state === "failed" ? failedAt : job.state);
          return (
            <>
              <p>
                <code>{job.imageUri}</code> <span className={`status status-${statusClass(job.state)}`}>{job.state}</span>
                {job.attempts > 1 && <span className="muted"> · attempt {job.attempts}</span>}
              </p>
              <ol className="stages" aria-label="Stages">
                {stages.map((s, i) => (
                  <li
                    key={s}
                    className={
                      job.state === "ready" || i < at ? "done" : i === at ? (job.state === "failed" ? "failed" : "current") : "todo"
                    }
                    aria-current={i === at ? "step" : undefined}
                  >
                    {s}
                    {s === "warming" && job.warmStage && i === at && <span className="muted"> · {job.warmStage}</span>}
                  </li>
                ))}
              </ol>
              {job.chunksTotal !== undefined && job.chunksTotal > 0 && (
                <label className="chunks">
                  Chunks {job.chunksDone} of {job.chunksTotal}
                  <progress max={job.chunksTotal} value={job.chunksDone} />
                </label>
              )}
              {job.outputTail && (
                <pre className="tail" aria-label="Output">
                  {job.outputTail}
                </pre>
              )}
              {job.error && (
                <p className="error" role="alert">
                  {job.error}
                </p>
              )}
              {job.state === "failed" && (
                <button type="button" disabled={retry.isPending} onClick={() => retry.mutate({ jobId })}>
                  Retry from {failedAt || "the failed stage"}
                </button>
              )}
              {retry.isError && <ErrorView error={retry.error} />}
            </>
          );
        }}
      </Loaded>
    </section>
  );
}
