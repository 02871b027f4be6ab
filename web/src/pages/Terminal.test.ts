import { shellURL } from "./Terminal";

describe("shellURL", () => {
  it("is the session's shell route over ws, sized like the terminal", () => {
    const u = new URL(shellURL("http://127.0.0.1:8080", "sess_1", 30, 100, null));
    expect(u.protocol).toBe("ws:");
    expect(u.pathname).toBe("/api/v1/sessions/sess_1/shell");
    expect(Object.fromEntries(u.searchParams)).toEqual({ rows: "30", cols: "100", term: "xterm-256color" });
  });

  it("uses wss on https and carries a pasted key, which a WebSocket cannot send as a header", () => {
    const u = new URL(shellURL("https://hangar.example", "sess_1", 24, 80, "hgr_k"));
    expect(u.protocol).toBe("wss:");
    expect(u.searchParams.get("api_key")).toBe("hgr_k");
  });
});
