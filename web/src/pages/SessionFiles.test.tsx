import { saveStream } from "./SessionFiles";

async function* frames<T>(...fs: T[]) {
  yield* fs;
}

describe("saveStream", () => {
  it("joins a ReadFile stream's chunks into one file named by its metadata", async () => {
    let saved: { blob: Blob; name: string } | undefined;
    const size = await saveStream(
      frames(
        { frame: { case: "metadata" as const, value: { fileName: "out.txt" } } },
        { frame: { case: "chunk" as const, value: new TextEncoder().encode("hello ") } },
        { frame: { case: "chunk" as const, value: new TextEncoder().encode("world") } },
      ),
      "fallback",
      (blob, name) => (saved = { blob, name }),
    );
    expect(size).toBe(11);
    expect(saved!.name).toBe("out.txt");
    expect(await saved!.blob.text()).toBe("hello world");
  });

  it("reads GetArtifact's frames (msg) with their media type, and falls back to the given name", async () => {
    let saved: { blob: Blob; name: string } | undefined;
    await saveStream(
      frames({ msg: { case: "metadata" as const, value: { mediaType: "image/png" } } }, { msg: { case: "chunk" as const, value: new Uint8Array([1, 2, 3]) } }),
      "shot.png",
      (blob, name) => (saved = { blob, name }),
    );
    expect(saved!.name).toBe("shot.png");
    expect(saved!.blob.type).toBe("image/png");
    expect(saved!.blob.size).toBe(3);
  });
});
