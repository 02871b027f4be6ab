package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/emptypb"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
)

func newImagesCmd() *cobra.Command {
	return newClientGroup("images", "Enable OCI images for sessions and follow their enable jobs (writes: admin only)",
		newImagesEnableCmd, newImagesListCmd, newImagesJobsCmd, newImagesJobCmd, newImagesRetryCmd,
		newImagesRefreshCmd, newImagesUpdateCmd, newImagesDisableCmd)
}

// imageConfigFlags are the flags that make an ImageConfig.
type imageConfigFlags struct {
	name, warmCmd, warmWorkdir string
	warmTimeout                uint64
	env, warmEnv, warmSecret   []string
	// The warm command's network, as a profile's (--network-default, --allow-host...).
	warmNetworkDefault                   string
	warmAllowHosts, warmAllowHostPattern []string
}

func (f *imageConfigFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.name, "name", "", "the image's display `NAME` (default: its URI)")
	fl.StringArrayVar(&f.env, "env", nil, "`KEY=VALUE` set in the image's sessions (repeatable)")
	fl.StringVar(&f.warmCmd, "warm-cmd", "", "a shell `COMMAND` run once in a sandbox of the image; its files become the image's warm layer")
	fl.StringVar(&f.warmWorkdir, "warm-workdir", "", "the warm command's working `DIR`")
	fl.Uint64Var(&f.warmTimeout, "warm-timeout", 0, "stop the warm command after `SECONDS` (default: an hour)")
	fl.StringArrayVar(&f.warmEnv, "warm-env", nil, "`KEY=VALUE` for the warm command (repeatable)")
	fl.StringArrayVar(&f.warmSecret, "warm-secret", nil, "`KEY=SECRET` puts an org secret in the warm command's environment (repeatable)")
	fl.StringVar(&f.warmNetworkDefault, "warm-network-default", "", "`allow` or `deny` (the default) the warm command's network access to hosts no --warm-allow-host names")
	fl.StringArrayVar(&f.warmAllowHosts, "warm-allow-host", nil, "let the warm command reach host `H` (repeatable)")
	fl.StringArrayVar(&f.warmAllowHostPattern, "warm-allow-host-pattern", nil, "let the warm command reach hosts matching `P`, such as *.example.com (repeatable)")
}

func (f *imageConfigFlags) config() (*appv1.ImageConfig, error) {
	cfg := &appv1.ImageConfig{Name: f.name, Env: map[string]string{}}
	for _, kv := range f.env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, usageError("--env %q: want KEY=VALUE", kv)
		}
		cfg.Env[k] = v
	}
	network := len(f.warmAllowHosts)+len(f.warmAllowHostPattern) > 0 || f.warmNetworkDefault != ""
	if f.warmCmd == "" {
		if len(f.warmEnv)+len(f.warmSecret) > 0 || f.warmWorkdir != "" || f.warmTimeout > 0 || network {
			return nil, usageError("--warm-env, --warm-secret, --warm-workdir, --warm-timeout and the --warm network flags need --warm-cmd")
		}
		return cfg, nil
	}
	w := &appv1.ImageWarmConfig{Command: []string{"sh", "-c", f.warmCmd}}
	if network {
		w.Network = &appv1.ProfileNetwork{Default: f.warmNetworkDefault, AllowHosts: f.warmAllowHosts, AllowHostPatterns: f.warmAllowHostPattern}
	}
	if f.warmWorkdir != "" {
		w.Workdir = &f.warmWorkdir
	}
	if f.warmTimeout > 0 {
		w.TimeoutSecs = &f.warmTimeout
	}
	for _, kv := range f.warmEnv {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, usageError("--warm-env %q: want KEY=VALUE", kv)
		}
		w.Env = append(w.Env, &appv1.CaptureEnvEntry{Name: k, Value: &appv1.CaptureEnvEntry_Literal{Literal: v}})
	}
	for _, kv := range f.warmSecret {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, usageError("--warm-secret %q: want KEY=SECRET", kv)
		}
		w.Env = append(w.Env, &appv1.CaptureEnvEntry{Name: k, Value: &appv1.CaptureEnvEntry_SecretRef{SecretRef: v}})
	}
	cfg.Warm = w
	return cfg, nil
}

func newImagesEnableCmd(f *clientFlags) *cobra.Command {
	var cf imageConfigFlags
	var follow bool
	cmd := clientCmd(f, "enable URI [--warm-cmd COMMAND] [--follow]", "Enable an image: pull, chunk, prestage and (with --warm-cmd) warm it",
		cobra.ExactArgs(1), func(c *apiClient, _ *cobra.Command, args []string) error {
			cfg, err := cf.config()
			if err != nil {
				return err
			}
			resp, err := call(c, c.images.EnableImage, &appv1.EnableImageRequest{ImageUri: args[0], Config: cfg})
			if err != nil {
				return err
			}
			return showJob(c, resp.GetJob(), follow)
		})
	cf.add(cmd)
	cmd.Flags().BoolVar(&follow, "follow", false, "draw the job's progress until it ends")
	return cmd
}

func newImagesUpdateCmd(f *clientFlags) *cobra.Command {
	var cf imageConfigFlags
	var follow, recapture bool
	cmd := clientCmd(f, "update URI [--warm-cmd COMMAND --allow-recapture] [--follow]", "Change an enabled image's config; a new warm command needs --allow-recapture",
		cobra.ExactArgs(1), func(c *apiClient, _ *cobra.Command, args []string) error {
			cfg, err := cf.config()
			if err != nil {
				return err
			}
			resp, err := call(c, c.images.UpdateImage, &appv1.UpdateImageRequest{ImageUri: args[0], Config: cfg, AllowRecapture: recapture})
			if err != nil {
				return err
			}
			if resp.GetJob() == nil {
				fmt.Fprintln(c.out, "updated; no job needed")
				return nil
			}
			return showJob(c, resp.GetJob(), follow)
		})
	cf.add(cmd)
	cmd.Flags().BoolVar(&recapture, "allow-recapture", false, "capture the warm layer again when the warm command changed")
	cmd.Flags().BoolVar(&follow, "follow", false, "draw the job's progress until it ends")
	return cmd
}

func newImagesListCmd(f *clientFlags) *cobra.Command {
	return clientCmd(f, "list", "List the enabled images", cobra.NoArgs, func(c *apiClient, _ *cobra.Command, _ []string) error {
		return send(c, c.images.ListEnabledImages, &emptypb.Empty{}, func(w io.Writer, resp *appv1.ListEnabledImagesResponse) {
			table(w, []string{"ID", "URI", "DIGEST", "WARM", "REFRESHED"}, resp.GetImages(), func(i *appv1.EnabledImageSummary) []string {
				warm := ""
				if i.GetConfig().GetWarm() != nil {
					warm = "yes"
				}
				return []string{i.GetId(), i.GetImageUri(), i.GetManifestDigest(), warm, i.GetLastRefreshedAt()}
			})
		})
	})
}

func newImagesJobsCmd(f *clientFlags) *cobra.Command {
	return clientCmd(f, "jobs", "List enable jobs, newest first", cobra.NoArgs, func(c *apiClient, _ *cobra.Command, _ []string) error {
		return send(c, c.images.ListEnableJobs, &emptypb.Empty{}, func(w io.Writer, resp *appv1.ListEnableJobsResponse) {
			table(w, []string{"ID", "URI", "STATE", "CHUNKS", "ATTEMPTS", "ERROR"}, resp.GetJobs(), func(j *appv1.EnableJob) []string {
				return []string{j.GetId(), j.GetImageUri(), j.GetState(), fmt.Sprintf("%d/%d", j.GetChunksDone(), j.GetChunksTotal()), fmt.Sprint(j.GetAttempts()), j.GetError()}
			})
		})
	})
}

func newImagesJobCmd(f *clientFlags) *cobra.Command {
	var follow bool
	cmd := idCmd(f, "job ID [--follow]", "Show an enable job", func(c *apiClient, _ *cobra.Command, id string) error {
		resp, err := call(c, c.images.GetEnableJob, &appv1.GetEnableJobRequest{JobId: id})
		if err != nil {
			return err
		}
		return showJob(c, resp.GetJob(), follow)
	})
	cmd.Flags().BoolVar(&follow, "follow", false, "draw the job's progress until it ends")
	return cmd
}

func newImagesRetryCmd(f *clientFlags) *cobra.Command {
	var follow bool
	cmd := idCmd(f, "retry ID [--follow]", "Resume a failed enable job from the stage that failed", func(c *apiClient, _ *cobra.Command, id string) error {
		resp, err := call(c, c.images.RetryEnableJob, &appv1.RetryEnableJobRequest{JobId: id})
		if err != nil {
			return err
		}
		return showJob(c, resp.GetJob(), follow)
	})
	cmd.Flags().BoolVar(&follow, "follow", false, "draw the job's progress until it ends")
	return cmd
}

func newImagesRefreshCmd(f *clientFlags) *cobra.Command {
	var follow, force bool
	cmd := idCmd(f, "refresh URI [--force-recapture] [--follow]", "Resolve the image's tag again; a new digest starts a job", func(c *apiClient, _ *cobra.Command, uri string) error {
		resp, err := call(c, c.images.RefreshImage, &appv1.RefreshImageRequest{ImageUri: uri, ForceRecapture: force})
		if err != nil {
			return err
		}
		if resp.GetJob() == nil {
			fmt.Fprintln(c.out, "unchanged; no job needed")
			return nil
		}
		return showJob(c, resp.GetJob(), follow)
	})
	cmd.Flags().BoolVar(&force, "force-recapture", false, "start a job (and capture the warm layer again) even when the digest is unchanged")
	cmd.Flags().BoolVar(&follow, "follow", false, "draw the job's progress until it ends")
	return cmd
}

func newImagesDisableCmd(f *clientFlags) *cobra.Command {
	return idCmd(f, "disable URI", "Stop new sessions from starting from an image (running ones continue)", func(c *apiClient, _ *cobra.Command, uri string) error {
		return send(c, c.images.DisableImage, &appv1.DisableImageRequest{ImageUri: uri}, func(w io.Writer, _ *emptypb.Empty) {
			fmt.Fprintf(w, "disabled %s\n", uri)
		})
	})
}

// followEvery is how often --follow reads the job.
const followEvery = 500 * time.Millisecond

// showJob prints a job; with follow it draws the job's stages and chunk progress until the job
// ends, prints the warm command's output tail, and fails when the job failed.
func showJob(c *apiClient, job *appv1.EnableJob, follow bool) error {
	if !follow || c.json || c.quiet {
		return c.show(&appv1.GetEnableJobResponse{Job: job}, func(w io.Writer) { record(w, job) })
	}
	last := ""
	for {
		if line := progressLine(job); line != last {
			fmt.Fprintln(c.out, line)
			last = line
		}
		if ended(job.GetState()) {
			break
		}
		select {
		case <-c.unbounded.Done():
			return c.unbounded.Err()
		case <-time.After(followEvery):
		}
		resp, err := c.images.GetEnableJob(c.unbounded, connect.NewRequest(&appv1.GetEnableJobRequest{JobId: job.GetId()}))
		if err != nil {
			return err
		}
		job = resp.Msg.GetJob()
	}
	if tail := job.GetOutputTail(); tail != "" {
		fmt.Fprintf(c.out, "--- warm command output (tail) ---\n%s", tail)
		if !strings.HasSuffix(tail, "\n") {
			fmt.Fprintln(c.out)
		}
	}
	if job.GetState() != "ready" {
		return errors.New("enable job " + job.GetId() + " " + job.GetState() + ": " + job.GetError())
	}
	fmt.Fprintf(c.out, "ready: %s@%s\n", job.GetImageUri(), job.GetManifestDigest())
	return nil
}

func ended(state string) bool { return state == "ready" || state == "failed" || state == "superseded" }

// jobStages are the stages a progress line shows, in order.
var jobStages = []string{"resolving", "pulling", "chunking", "prestaging", "warming", "ready"}

// progressLine draws a job's stages (done ones checked, the current one marked) and a bar of
// its chunks: "[✓ resolving] [✓ pulling] [▸ chunking] ... chunks [#####-----] 12/24".
func progressLine(j *appv1.EnableJob) string {
	var b strings.Builder
	cur := j.GetState()
	if cur == "failed" || cur == "superseded" {
		return fmt.Sprintf("%s: %s (attempt %d)", cur, j.GetError(), j.GetAttempts())
	}
	reached := cur == "ready"
	idx := -1
	for i, s := range jobStages {
		if s == cur {
			idx = i
		}
	}
	for i, s := range jobStages {
		if s == "warming" && j.GetWarmStages() == "" {
			continue
		}
		mark := " "
		switch {
		case reached || i < idx:
			mark = "✓"
		case i == idx:
			mark = "▸"
		}
		fmt.Fprintf(&b, "[%s %s] ", mark, s)
	}
	if total := j.GetChunksTotal(); total > 0 {
		const width = 20
		done := min(int(j.GetChunksDone())*width/int(total), width)
		fmt.Fprintf(&b, "chunks [%s%s] %d/%d", strings.Repeat("#", done), strings.Repeat("-", width-done), j.GetChunksDone(), total)
	}
	return strings.TrimSpace(b.String())
}
