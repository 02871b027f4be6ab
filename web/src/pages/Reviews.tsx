import { timestampDate, type Timestamp } from "@bufbuild/protobuf/wkt";
import { useMutation, useQuery } from "@connectrpc/connect-query";
import { Link, useParams } from "react-router-dom";

import { Loaded } from "../components/Loaded";
import { ErrorView, Loading } from "../components/States";
import { Pager, useUrlFilters } from "../components/UrlFilters";
import { ReviewService, type FindingCounts, type ReviewFinding } from "../gen/svc/app/v1/review_pb";

export const severities = ["critical", "high", "medium", "low"];
const reviewPageSize = 50;

// At shows a protobuf timestamp ("—" when there is none).
export function At({ ts }: { ts?: Timestamp }) {
  if (!ts) return <>—</>;
  const d = timestampDate(ts);
  return <time dateTime={d.toISOString()}>{d.toLocaleString()}</time>;
}

function Counts({ counts }: { counts?: FindingCounts }) {
  if (!counts || counts.total === 0) return <span className="muted">none</span>;
  return (
    <span className="counts">
      {severities.map((s) => {
        const n = counts[s as keyof FindingCounts] as number;
        return n > 0 ? (
          <span key={s} className={`sev sev-${s}`}>
            {n} {s}
          </span>
        ) : null;
      })}
    </span>
  );
}

// Facet is one multi-valued filter held in the URL (?repo=a&repo=b): a checkbox per value the
// server's facets offer, plus any value the URL already names.
function Facet({ legend, param, values, params, update }: { legend: string; param: string; values: string[]; params: URLSearchParams; update: (f: (p: URLSearchParams) => void) => void }) {
  const chosen = params.getAll(param);
  const all = [...new Set([...values, ...chosen])];
  if (all.length === 0) return null;
  return (
    <fieldset>
      <legend>{legend}</legend>
      {all.map((v) => (
        <label key={v} className="chip">
          <input
            type="checkbox"
            checked={chosen.includes(v)}
            onChange={(e) =>
              update((p) => {
                const rest = chosen.filter((x) => x !== v);
                p.delete(param);
                for (const x of e.target.checked ? [...rest, v] : rest) p.append(param, x);
              })
            }
          />
          {v}
        </label>
      ))}
    </fieldset>
  );
}

// ReviewsPage lists the active review of each pull request with facets; every filter lives in
// the URL, so a filtered list is a link.
export function ReviewsPage() {
  const { params, search, page, draft, setDraft, update, submitSearch } = useUrlFilters();
  const list = useQuery(ReviewService.method.listReviews, {
    search,
    repos: params.getAll("repo"),
    authors: params.getAll("author"),
    prStates: params.getAll("pr_state"),
    statuses: params.getAll("status"),
    severities: params.getAll("severity"),
    page,
    pageSize: reviewPageSize,
  });
  const facets = list.data?.facets;
  return (
    <section>
      <h1>Reviews</h1>
      <p>
        <Link to="/reviews/enrollments">Enrolled repositories</Link>
      </p>
      <form
        className="filters"
        role="search"
        onSubmit={(e) => {
          e.preventDefault();
          submitSearch();
        }}
      >
        <label>
          Search
          <input type="search" value={draft} onChange={(e) => setDraft(e.target.value)} placeholder="title, repo, author, #123" />
        </label>
        <button type="submit">Search</button>
        <Facet legend="Repository" param="repo" values={facets?.repos ?? []} params={params} update={update} />
        <Facet legend="Author" param="author" values={facets?.authors ?? []} params={params} update={update} />
        <Facet legend="PR state" param="pr_state" values={facets?.prStates ?? []} params={params} update={update} />
        <Facet legend="Status" param="status" values={facets?.statuses ?? []} params={params} update={update} />
        <Facet legend="Open findings" param="severity" values={severities} params={params} update={update} />
      </form>
      <Loaded query={list} what="reviews" isEmpty={(d) => d.reviews.length === 0} empty="No reviews match.">
        {(d) => (
          <>
            <div className="table-wrap">
              <table className="list" aria-label="Reviews">
                <thead>
                  <tr>
                    <th>Pull request</th>
                    <th>Status</th>
                    <th>Findings</th>
                    <th>Author</th>
                    <th>Updated</th>
                  </tr>
                </thead>
                <tbody>
                  {d.reviews.map((r) => (
                    <tr key={r.id}>
                      <td>
                        <Link to={`/reviews/${r.id}`}>
                          {r.repo}#{r.prNumber} {r.prTitle}
                        </Link>
                        {r.prState && <span className="muted"> · {r.prState}</span>}
                      </td>
                      <td>
                        <span className={`status status-${r.status}`}>{r.status}</span>
                      </td>
                      <td>
                        <Counts counts={r.findingCounts} />
                      </td>
                      <td>{r.prAuthor ?? "—"}</td>
                      <td>
                        <At ts={r.updatedAt} />
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
            <Pager page={page} pageSize={reviewPageSize} total={d.totalCount} noun="reviews" update={update} />
          </>
        )}
      </Loaded>
    </section>
  );
}

// ReviewPage is one review pass: the PR, its findings grouped by severity with their verdicts,
// the PR's other passes and the pass's events.
export function ReviewPage() {
  const { reviewId = "" } = useParams();
  const got = useQuery(ReviewService.method.getReview, { id: reviewId });
  const retry = useMutation(ReviewService.method.retryReview);
  if (got.isPending) return <Loading what="the review" />;
  if (got.isError) return <ErrorView error={got.error} />;
  const { review: r, findings, verdicts, passes, events } = got.data;
  const verdictOf = new Map(verdicts.map((v) => [v.findingId, v]));
  const bySeverity = (s: string) => findings.filter((f) => f.severity === s);
  const other = findings.filter((f) => !severities.includes(f.severity));
  return (
    <section>
      <p>
        <Link to="/reviews">← Reviews</Link>
      </p>
      <h1>
        {r!.repo}#{r!.prNumber} {r!.prTitle}
      </h1>
      <dl className="facts">
        <dt>Status</dt>
        <dd>
          <span className={`status status-${r!.status}`}>{r!.status}</span>
        </dd>
        <dt>Pull request</dt>
        <dd>
          {r!.prUrl && /^https?:\/\//.test(r!.prUrl) ? (
            <a href={r!.prUrl} rel="noreferrer noopener">
              {r!.prUrl}
            </a>
          ) : (
            "—"
          )}{" "}
          {r!.prState && <span className="muted">{r!.prState}</span>}
        </dd>
        <dt>Branches</dt>
        <dd>
          <code>{r!.headBranch ?? r!.headSha.slice(0, 12)}</code> → <code>{r!.baseBranch ?? r!.baseSha.slice(0, 12)}</code>
        </dd>
        <dt>Trigger</dt>
        <dd>{r!.trigger}</dd>
        {r!.taskId && (
          <>
            <dt>Task</dt>
            <dd>
              <Link to={`/tasks/${r!.taskId}`}>{r!.taskId}</Link>
            </dd>
          </>
        )}
        <dt>Findings</dt>
        <dd>
          <Counts counts={r!.findingCounts} />
        </dd>
      </dl>
      <div className="actions">
        <button type="button" disabled={retry.isPending} onClick={() => retry.mutate({ id: r!.id })}>
          Retry review
        </button>
        {retry.data && <span role="status">Retrying{retry.data.reviewId && <> as <Link to={`/reviews/${retry.data.reviewId}`}>{retry.data.reviewId}</Link></>}</span>}
      </div>
      {retry.isError && <ErrorView error={retry.error} />}
      {r!.summaryMd && <pre className="summary">{r!.summaryMd}</pre>}
      <div className="columns">
        <div>
          <h2>Findings</h2>
          {findings.length === 0 && <p className="empty">No findings.</p>}
          {[...severities.map((s) => [s, bySeverity(s)] as const), ["other", other] as const].map(([s, list]) =>
            list.length === 0 ? null : (
              <section key={s} aria-label={`${s} findings`}>
                <h3 className={`sev sev-${s}`}>
                  {s} ({list.length})
                </h3>
                <ul className="findings">
                  {list.map((f) => (
                    <FindingView key={f.id} finding={f} verdict={verdictOf.get(f.id)?.verdict} reasoning={verdictOf.get(f.id)?.reasoning} />
                  ))}
                </ul>
              </section>
            ),
          )}
        </div>
        <aside>
          <section aria-label="Passes">
            <h2>Passes</h2>
            {passes.length === 0 ? (
              <p className="empty">Only this one.</p>
            ) : (
              <ul>
                {passes.map((p) => (
                  <li key={p.id}>
                    {p.id === r!.id ? <strong>{p.id}</strong> : <Link to={`/reviews/${p.id}`}>{p.id}</Link>}{" "}
                    <span className={`status status-${p.status}`}>{p.status}</span> <code>{p.headSha.slice(0, 7)}</code>
                  </li>
                ))}
              </ul>
            )}
          </section>
          <section aria-label="Events">
            <h2>Events</h2>
            <ol className="events">
              {events.map((e) => (
                <li key={e.id}>
                  <code>{e.kind}</code> {e.detail && <span className="muted">{e.detail}</span>} <At ts={e.createdAt} />
                </li>
              ))}
            </ol>
          </section>
        </aside>
      </div>
    </section>
  );
}

function FindingView({ finding: f, verdict, reasoning }: { finding: ReviewFinding; verdict?: string; reasoning?: string }) {
  const lines = f.startLine ? `:${f.startLine}${f.endLine && f.endLine !== f.startLine ? `-${f.endLine}` : ""}` : "";
  return (
    <li className="finding">
      <p>
        <strong>{f.title}</strong> <span className="muted">· {f.category} · {f.confidence} confidence · {f.state}</span>
      </p>
      <p>
        <code>
          {f.path}
          {lines}
        </code>
      </p>
      <p className="body">{f.bodyMd}</p>
      {f.suggestedFix && <pre>{f.suggestedFix}</pre>}
      {verdict && (
        <p className="verdict">
          Verdict: <strong>{verdict}</strong> {reasoning && <span className="muted">— {reasoning}</span>}
        </p>
      )}
    </li>
  );
}
