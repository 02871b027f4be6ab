import type { Transport } from "@connectrpc/connect";
import { TransportProvider } from "@connectrpc/connect-query";
import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { useState } from "react";
import { Navigate, Route, Routes } from "react-router-dom";

import { Layout } from "./components/Layout";
import { AutomationPage } from "./pages/Automation";
import { AutomationsPage } from "./pages/Automations";
import { NotFound } from "./pages/NotFound";
import { RunPage } from "./pages/Run";
import { SessionPage } from "./pages/Session";
import { TaskPage } from "./pages/Task";
import { TasksPage } from "./pages/Tasks";

// App is the whole dashboard under one transport: tests hand it an in-memory one.
export function App({ transport }: { transport: Transport }) {
  const [queryClient] = useState(
    () => new QueryClient({ defaultOptions: { queries: { retry: false, refetchOnWindowFocus: false } } }),
  );
  return (
    <TransportProvider transport={transport}>
      <QueryClientProvider client={queryClient}>
        <Routes>
          <Route element={<Layout />}>
            <Route index element={<Navigate to="/tasks" replace />} />
            <Route path="tasks" element={<TasksPage />} />
            <Route path="tasks/:taskId" element={<TaskPage />} />
            <Route path="sessions/:sessionId" element={<SessionPage />} />
            <Route path="automations" element={<AutomationsPage />} />
            <Route path="automations/:automationId" element={<AutomationPage />} />
            <Route path="runs/:runId" element={<RunPage />} />
            <Route path="*" element={<NotFound />} />
          </Route>
        </Routes>
      </QueryClientProvider>
    </TransportProvider>
  );
}
