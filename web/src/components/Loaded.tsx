import type { UseQueryResult } from "@tanstack/react-query";
import type { ReactNode } from "react";

import { Empty, ErrorView, Loading } from "./States";

// Loaded shows a query's three states the same way on every page: loading, its Connect error,
// or (when isEmpty says so) the empty message; else children with the data.
export function Loaded<T>({
  query,
  what,
  isEmpty,
  empty,
  children,
}: {
  query: UseQueryResult<T>;
  what: string;
  isEmpty?: (data: T) => boolean;
  empty?: ReactNode;
  children: (data: T) => ReactNode;
}) {
  if (query.isPending) return <Loading what={what} />;
  if (query.isError) return <ErrorView error={query.error} />;
  if (isEmpty?.(query.data)) return <Empty>{empty}</Empty>;
  return <>{children(query.data)}</>;
}
