import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { fireEvent, screen, within } from "@testing-library/react";

import { EnableJobSchema, ImageService } from "../gen/svc/app/v1/image_pb";
import { renderApp } from "../testing";

const uri = "registry.test/agent:latest";

describe("images page", () => {
  it("follows an enable job live: its stage, the chunks bar, the output tail, and retry after a failure", async () => {
    // Each GetEnableJob answers the job's next state, as the worker moves it.
    const states: MessageInitShape<typeof EnableJobSchema>[] = [
      { state: "chunking", chunksTotal: 10, chunksDone: 4 },
      { state: "warming", warmStage: "command", outputTail: "added 312 packages\n" },
      { state: "failed", error: "warming: command exited 1", outputTail: "npm ERR! boom\n", attempts: 1 },
      { state: "ready", attempts: 2 },
    ];
    let at = 0;
    const retried: string[] = [];
    const job = () => create(EnableJobSchema, { id: "job_1", imageUri: uri, ...states[Math.min(at, states.length - 1)] });
    renderApp("/images?job=job_1", (r) =>
      r.service(ImageService, {
        listEnabledImages: () => ({ images: at >= 3 ? [{ id: "img_1", imageUri: uri, manifestDigest: "sha256:abc" }] : [] }),
        listEnableJobs: () => ({ jobs: [job()] }),
        getEnableJob: () => {
          const j = job();
          if (at < 2) at++;
          return { job: j };
        },
        retryEnableJob: (req) => {
          retried.push(req.jobId);
          at = 3;
          return { job: job() };
        },
      }),
    );
    const progress = await screen.findByRole("region", { name: "Enable job" });
    const chunks = await within(progress).findByLabelText("Chunks 4 of 10");
    expect((chunks as HTMLProgressElement).value).toBe(4);
    expect(within(progress).getByRole("list", { name: "Stages" }).querySelector("[aria-current=step]")?.textContent).toBe("chunking");

    expect((await within(progress).findByLabelText("Output")).textContent).toBe("added 312 packages\n");
    expect((await within(progress).findByRole("alert")).textContent).toBe("warming: command exited 1");
    expect(within(progress).getByRole("list", { name: "Stages" }).querySelector(".failed")?.textContent).toBe("warming");

    fireEvent.click(within(progress).getByRole("button", { name: "Retry from warming" }));
    await within(progress).findByText("ready");
    expect(retried).toEqual(["job_1"]);
    const images = await screen.findByRole("table", { name: "Enabled images" });
    expect(images.textContent).toContain("img_1");
  });
});
