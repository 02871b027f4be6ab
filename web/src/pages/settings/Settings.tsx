import { NavLink, Outlet } from "react-router-dom";

// SettingsPage holds the organisation's and the caller's settings, one tab (and one deep link)
// each.
export function SettingsPage() {
  return (
    <section>
      <h1>Settings</h1>
      <nav className="tabs" aria-label="Settings">
        <NavLink to="/settings/keys">API keys</NavLink>
        <NavLink to="/settings/secrets">Org secrets</NavLink>
        <NavLink to="/settings/registries">Registries</NavLink>
        <NavLink to="/settings/oauth">OAuth connections</NavLink>
        <NavLink to="/settings/webhooks">Webhooks</NavLink>
      </nav>
      <Outlet />
    </section>
  );
}
