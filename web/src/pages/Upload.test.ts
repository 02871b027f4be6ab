// @vitest-environment node
import { uploadFile } from "./SessionFiles";

describe("uploadFile", () => {
  // Node (for its Blob and WebCrypto, which jsdom's do not mix with) has no sessionStorage: no
  // key is pasted.
  beforeEach(() => vi.stubGlobal("sessionStorage", { getItem: () => null }));
  afterEach(() => vi.unstubAllGlobals());

  it("PUTs the file to its path with its sha256 and the CSRF header", async () => {
    let seen: { url: string; init?: RequestInit } | undefined;
    await uploadFile("sess_1", "/root/a b.txt", new Blob(["abc"]), async (url, init) => {
      seen = { url: String(url), init };
      return new Response(null, { status: 204 });
    });
    expect(seen?.url).toBe("/api/v1/sessions/sess_1/files/root/a%20b.txt");
    const h = seen?.init?.headers as Record<string, string>;
    expect(seen?.init?.method).toBe("PUT");
    expect(h["X-Hangar-Sha256"]).toBe("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    expect(h["X-Hangar-Csrf"]).toBe("1");
  });

  it("throws the route's refusal as a Connect error with its code", async () => {
    const refused = uploadFile("sess_1", "/root/x", new Blob(["x"]), async () =>
      Response.json({ code: "invalid_argument", message: "sha256: does not match the body" }, { status: 400 }),
    );
    await expect(refused).rejects.toMatchObject({ code: 3, rawMessage: "sha256: does not match the body" });
  });
});
