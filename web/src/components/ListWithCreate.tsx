// One scaffold for the dashboard's list pages: a heading, an optional create form, the errors of
// the page's row actions, and the list itself as a table with the same loading, empty and error
// states everywhere. Pages say only what is theirs: the columns, the rows and the form's fields.
import type { UseQueryResult } from "@tanstack/react-query";
import type { FormEvent, ReactNode } from "react";

import { Loaded } from "./Loaded";
import { ErrorView } from "./States";

export type Column<R> = {
  header: string;
  cell: (row: R) => ReactNode;
  // className styles the column's cells ("actions" lays its buttons out in a row).
  className?: string;
};

export function ListWithCreate<T, R>(props: {
  // title heads the list; without one the page's own heading stands for it.
  title?: string;
  // level is the heading's: 1 for a page of its own, 2 for a tab or a part of a page.
  level?: 1 | 2;
  // create is the form that adds to the list (usually a CreateForm), shown above it.
  create?: ReactNode;
  // above is what stands between the heading and the form: filters, a secret shown once.
  above?: ReactNode;
  query: UseQueryResult<T>;
  rows: (data: T) => R[];
  rowKey: (row: R) => string;
  columns: Column<R>[];
  // what names the rows while they load ("Loading registries…").
  what: string;
  empty: ReactNode;
  // errors are the row actions' (delete, revoke…), each shown while it stands.
  errors?: unknown[];
  // label names the table for assistive technology and tests; the title when not given.
  label?: string;
}) {
  const Heading = props.level === 1 ? "h1" : "h2";
  return (
    <>
      {props.title && <Heading>{props.title}</Heading>}
      {props.above}
      {props.create}
      {props.errors?.map((e, i) => e != null && <ErrorView key={i} error={e} />)}
      <Loaded query={props.query} what={props.what} isEmpty={(d) => props.rows(d).length === 0} empty={props.empty}>
        {(d) => (
          <div className="table-wrap">
            <table className="list" aria-label={props.label ?? props.title}>
              <thead>
                <tr>
                  {props.columns.map((c, i) => (
                    <th key={i}>{c.header}</th>
                  ))}
                </tr>
              </thead>
              <tbody>
                {props.rows(d).map((r) => (
                  <tr key={props.rowKey(r)}>
                    {props.columns.map((c, i) => (
                      <td key={i} className={c.className}>
                        {c.cell(r)}
                      </td>
                    ))}
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
      </Loaded>
    </>
  );
}

// CreateForm is the form of a list page: its title, the fields, one submit button disabled
// while the call is in flight, and the call's Connect error under it.
export function CreateForm(props: {
  title: string;
  // label names the form for assistive technology and tests; the title when not given.
  label?: string;
  submitLabel: string;
  call: { isPending: boolean; error: unknown };
  onSubmit: () => void;
  children: ReactNode;
  // after stands beside the submit button: a second action, the result of the call.
  after?: ReactNode;
}) {
  const submit = (e: FormEvent) => {
    e.preventDefault();
    props.onSubmit();
  };
  return (
    <form className="form" aria-label={props.label ?? props.title} onSubmit={submit}>
      <h2>{props.title}</h2>
      {props.children}
      <button type="submit" disabled={props.call.isPending}>
        {props.submitLabel}
      </button>
      {props.after}
      {props.call.error != null && <ErrorView error={props.call.error} />}
    </form>
  );
}

// When formats an RFC 3339 time for a table cell ("—" when there is none).
export function When({ at }: { at?: string }) {
  if (!at) return <>—</>;
  return <time dateTime={at}>{new Date(at).toLocaleString()}</time>;
}
