import type { Transport } from "@connectrpc/connect";
import { TransportProvider } from "@connectrpc/connect-query";
import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { useState } from "react";
import { Navigate, Route, Routes } from "react-router-dom";

import { AuthContext, httpAuth, type Auth } from "./auth";
import { Layout } from "./components/Layout";
import { AutomationPage, DefinitionTab } from "./pages/Automation";
import { DropsTab, InstancesTab, SamplesTab } from "./pages/AutomationActivity";
import { AutomationsPage } from "./pages/Automations";
import { HarnessesPage, ModelRoutersPage, RouterModelsPage } from "./pages/Catalog";
import { EnrollmentsPage } from "./pages/Enrollments";
import { EventCatalogPage } from "./pages/EventCatalog";
import { ImagesPage } from "./pages/Images";
import { NotFound } from "./pages/NotFound";
import { ProfilePage, ProfilesPage } from "./pages/Profiles";
import { ReviewPage, ReviewsPage } from "./pages/Reviews";
import { RunPage } from "./pages/Run";
import { SessionPage } from "./pages/Session";
import { TaskPage } from "./pages/Task";
import { TasksPage } from "./pages/Tasks";
import { ApiKeysPage } from "./pages/settings/ApiKeys";
import { OAuthPage } from "./pages/settings/OAuth";
import { RegistriesPage } from "./pages/settings/Registries";
import { SecretsPage } from "./pages/settings/Secrets";
import { SettingsPage } from "./pages/settings/Settings";
import { WebhooksPage } from "./pages/settings/Webhooks";

// App is the whole dashboard under one transport and one sign-in: tests hand it in-memory ones.
export function App({ transport, auth = httpAuth }: { transport: Transport; auth?: Auth }) {
  const [queryClient] = useState(
    () => new QueryClient({ defaultOptions: { queries: { retry: false, refetchOnWindowFocus: false } } }),
  );
  return (
    <AuthContext.Provider value={auth}>
    <TransportProvider transport={transport}>
      <QueryClientProvider client={queryClient}>
        <Routes>
          <Route element={<Layout />}>
            <Route index element={<Navigate to="/tasks" replace />} />
            <Route path="tasks" element={<TasksPage />} />
            <Route path="tasks/:taskId" element={<TaskPage />} />
            <Route path="sessions/:sessionId" element={<SessionPage />} />
            <Route path="automations" element={<AutomationsPage />} />
            <Route path="automations/:automationId" element={<AutomationPage />}>
              <Route index element={<DefinitionTab />} />
              <Route path="instances" element={<InstancesTab />} />
              <Route path="drops" element={<DropsTab />} />
              <Route path="samples" element={<SamplesTab />} />
            </Route>
            <Route path="event-catalog" element={<EventCatalogPage />} />
            <Route path="runs/:runId" element={<RunPage />} />
            <Route path="profiles" element={<ProfilesPage />} />
            <Route path="profiles/:profileId" element={<ProfilePage />} />
            <Route path="images" element={<ImagesPage />} />
            <Route path="harnesses" element={<HarnessesPage />} />
            <Route path="model-routers" element={<ModelRoutersPage />} />
            <Route path="model-routers/:routerId" element={<RouterModelsPage />} />
            <Route path="reviews" element={<ReviewsPage />} />
            <Route path="reviews/enrollments" element={<EnrollmentsPage />} />
            <Route path="reviews/:reviewId" element={<ReviewPage />} />
            <Route path="settings" element={<SettingsPage />}>
              <Route index element={<Navigate to="keys" replace />} />
              <Route path="keys" element={<ApiKeysPage />} />
              <Route path="secrets" element={<SecretsPage />} />
              <Route path="registries" element={<RegistriesPage />} />
              <Route path="oauth" element={<OAuthPage />} />
              <Route path="webhooks" element={<WebhooksPage />} />
            </Route>
            <Route path="*" element={<NotFound />} />
          </Route>
        </Routes>
      </QueryClientProvider>
    </TransportProvider>
    </AuthContext.Provider>
  );
}
