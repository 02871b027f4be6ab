// The list pages' filters live in the URL, so a filtered page is a link: one hook reads the
// search and page from it and changes it, and one pager moves the page.
import { useEffect, useState } from "react";
import { useSearchParams } from "react-router-dom";

export function useUrlFilters() {
  const [params, setParams] = useSearchParams();
  const search = params.get("q") ?? "";
  const page = Math.max(1, Number(params.get("page")) || 1);
  const [draft, setDraft] = useState(search);
  useEffect(() => setDraft(search), [search]);
  // A new filter starts again at page 1; only the pager keeps (and moves) the page.
  const update = (change: (p: URLSearchParams) => void) => {
    const next = new URLSearchParams(params);
    next.delete("page");
    change(next);
    setParams(next);
  };
  const submitSearch = () => update((p) => (draft ? p.set("q", draft) : p.delete("q")));
  return { params, search, page, draft, setDraft, update, submitSearch };
}

export function Pager(props: { page: number; pageSize: number; total: number; noun: string; update: (change: (p: URLSearchParams) => void) => void }) {
  const { page, total, update } = props;
  const pages = Math.max(1, Math.ceil(total / props.pageSize));
  return (
    <nav className="pager" aria-label="Pages">
      <button disabled={page <= 1} onClick={() => update((p) => p.set("page", String(page - 1)))}>
        Previous
      </button>
      <span>
        Page {page} of {pages} · {total} {props.noun}
      </span>
      <button disabled={page >= pages} onClick={() => update((p) => p.set("page", String(page + 1)))}>
        Next
      </button>
    </nav>
  );
}
