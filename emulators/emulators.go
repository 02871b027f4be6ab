package emulators

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

// Kind names one emulator.
type Kind string

const (
	Firestore Kind = "firestore"
	PubSub    Kind = "pubsub"
)

// The variables the Google client libraries read to find an emulator.
const (
	FirestoreHostEnv = "FIRESTORE_EMULATOR_HOST"
	PubSubHostEnv    = "PUBSUB_EMULATOR_HOST"
)

// DefaultStartTimeout bounds how long Start waits for the emulators to answer.
const DefaultStartTimeout = 60 * time.Second

// ErrNotInstalled is wrapped by the errors Start returns when gcloud or an emulator component
// is missing, so callers can tell "install something" from "something broke".
var ErrNotInstalled = errors.New("not installed")

// Options configure Start and Exec.
type Options struct {
	// Kinds lists the emulators to run; empty means Firestore and Pub/Sub.
	Kinds []Kind
	// DataDir, when set, keeps emulator data across runs: Firestore imports the newest export
	// in DataDir/firestore on start and Stop (and SaveEvery) exports Project's (default)
	// database there; Pub/Sub keeps its state in DataDir/pubsub.
	DataDir string
	// SaveEvery, with DataDir, also saves Firestore this often while the set runs, so that a
	// crash of this process (kill -9 included) loses at most about this much; zero means only
	// Stop saves.
	SaveEvery time.Duration
	// Project is the project whose (default) Firestore database Stop saves to DataDir; it is
	// required with DataDir. Only one project can be saved: the emulator's own
	// --export-on-exit fails on (default) databases, and an import seeds every project with
	// the same data anyway.
	Project string
	// Log receives the emulators' output; nil discards it.
	Log io.Writer
	// ReuseFromEnv uses an emulator already named by FIRESTORE_EMULATOR_HOST or
	// PUBSUB_EMULATOR_HOST instead of starting one; Stop leaves such emulators running.
	ReuseFromEnv bool
	// StartTimeout bounds the wait for readiness; zero means DefaultStartTimeout.
	StartTimeout time.Duration
}

// Set is a group of running emulators.
type Set struct {
	firestore *emulator
	pubsub    *emulator
	dataDir   string
	project   string
	log       io.Writer

	// saveMu keeps one save at a time: the periodic one and Stop's.
	saveMu     sync.Mutex
	stopSaving chan struct{}
	savingDone chan struct{}

	stopOnce sync.Once
	stopErr  error
}

// Start starts (or, with ReuseFromEnv, finds) the emulators in opts.Kinds concurrently and
// returns once all of them answer. On error nothing it started is left running.
func Start(ctx context.Context, opts Options) (*Set, error) {
	kinds, err := kindsOf(opts.Kinds)
	if err != nil {
		return nil, err
	}
	if opts.DataDir != "" && opts.Project == "" && contains(kinds, Firestore) && reusedHost(opts, Firestore) == "" {
		return nil, errors.New("start emulators: Options.Project is required with DataDir")
	}
	if opts.DataDir != "" {
		// The paths go to other processes, and over HTTP for exports: make them mean one thing.
		if opts.DataDir, err = filepath.Abs(opts.DataDir); err != nil {
			return nil, fmt.Errorf("emulator data dir: %w", err)
		}
	}
	timeout := opts.StartTimeout
	if timeout <= 0 {
		timeout = DefaultStartTimeout
	}
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, fmt.Errorf("emulators not ready within %s", timeout))
	defer cancel()

	logw := &lockedWriter{w: opts.Log}
	if logw.w == nil {
		logw.w = io.Discard
	}
	emus := make([]*emulator, len(kinds))
	errs := make([]error, len(kinds))
	var wg sync.WaitGroup
	for i, k := range kinds {
		wg.Go(func() { emus[i], errs[i] = startOne(ctx, k, opts, logw) })
	}
	wg.Wait()

	s := &Set{dataDir: opts.DataDir, project: opts.Project, log: logw}
	for _, e := range emus {
		if e == nil {
			continue
		}
		switch e.kind {
		case Firestore:
			s.firestore = e
		case PubSub:
			s.pubsub = e
		}
	}
	if err := errors.Join(errs...); err != nil {
		// Exporting a half-started set would replace the saved data for nothing.
		return nil, errors.Join(err, s.stop(false))
	}
	if opts.SaveEvery > 0 && s.saves() {
		s.stopSaving, s.savingDone = make(chan struct{}), make(chan struct{})
		go s.saveEvery(opts.SaveEvery)
	}
	return s, nil
}

// saves reports whether the set saves Firestore data: it has a data dir and started the
// emulator (one reused from the environment is someone else's to save).
func (s *Set) saves() bool {
	return s.dataDir != "" && s.firestore != nil && s.firestore.cmd != nil
}

// saveEvery saves Firestore each period until Stop. A failed save is logged and tried again
// at the next tick: the previous export stays in place.
func (s *Set) saveEvery(period time.Duration) {
	defer close(s.savingDone)
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		select {
		case <-s.stopSaving:
			return
		case <-tick.C:
			if err := s.saveFirestore(); err != nil {
				fmt.Fprintf(s.log, "hangar: periodic %v\n", err)
			}
		}
	}
}

func kindsOf(kinds []Kind) ([]Kind, error) {
	if len(kinds) == 0 {
		return []Kind{Firestore, PubSub}, nil
	}
	var out []Kind
	for _, k := range kinds {
		if k != Firestore && k != PubSub {
			return nil, fmt.Errorf("unknown emulator kind %q", k)
		}
		if !contains(out, k) {
			out = append(out, k)
		}
	}
	return out, nil
}

func contains(kinds []Kind, k Kind) bool {
	for _, x := range kinds {
		if x == k {
			return true
		}
	}
	return false
}

func startOne(ctx context.Context, k Kind, opts Options, logw io.Writer) (*emulator, error) {
	if host := reusedHost(opts, k); host != "" {
		e := &emulator{kind: k, host: host}
		if err := e.waitReady(ctx); err != nil {
			return nil, fmt.Errorf("wait for %s emulator from %s=%s: %w", k, hostEnv(k), host, err)
		}
		return e, nil
	}

	var args []string
	switch k {
	case Firestore:
		args = []string{"emulators", "firestore", "start"}
		if opts.DataDir != "" {
			latest, err := latestExport(filepath.Join(opts.DataDir, "firestore"))
			if err != nil {
				return nil, fmt.Errorf("start firestore emulator: %w", err)
			}
			if latest != "" {
				args = append(args, "--import-data="+latest)
			}
		}
	case PubSub:
		args = []string{"beta", "emulators", "pubsub", "start"}
		if opts.DataDir != "" {
			dir := filepath.Join(opts.DataDir, "pubsub")
			// gcloud writes env.yaml there and fails if the directory is missing.
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return nil, fmt.Errorf("start pubsub emulator: %w", err)
			}
			args = append(args, "--data-dir="+dir)
		}
	}
	e, err := launch(ctx, k, args, logw)
	if err != nil {
		return nil, fmt.Errorf("start %s emulator: %w", k, err)
	}
	return e, nil
}

// reusedHost is the address of an emulator of kind k to reuse, or "".
func reusedHost(opts Options, k Kind) string {
	if !opts.ReuseFromEnv {
		return ""
	}
	return os.Getenv(hostEnv(k))
}

func hostEnv(k Kind) string {
	if k == Firestore {
		return FirestoreHostEnv
	}
	return PubSubHostEnv
}

// FirestoreHost is the Firestore emulator's host:port, or "" if the set has none.
func (s *Set) FirestoreHost() string { return s.firestore.hostOrEmpty() }

// PubSubHost is the Pub/Sub emulator's host:port, or "" if the set has none.
func (s *Set) PubSubHost() string { return s.pubsub.hostOrEmpty() }

// Env returns the NAME=host:port pairs that point client libraries at the set.
func (s *Set) Env() []string {
	var env []string
	if h := s.FirestoreHost(); h != "" {
		env = append(env, FirestoreHostEnv+"="+h)
	}
	if h := s.PubSubHost(); h != "" {
		env = append(env, PubSubHostEnv+"="+h)
	}
	return env
}

// Stop saves Firestore data when Options.DataDir was set, then stops every emulator the set
// started and waits for their processes; emulators reused from the environment keep running.
// Stopping twice is harmless.
func (s *Set) Stop() error {
	s.stopOnce.Do(func() { s.stopErr = s.stop(true) })
	return s.stopErr
}

func (s *Set) stop(save bool) error {
	var errs []error
	if s.stopSaving != nil {
		close(s.stopSaving)
		<-s.savingDone
	}
	if save && s.saves() {
		if err := s.saveFirestore(); err != nil {
			errs = append(errs, err)
		}
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, e := range []*emulator{s.firestore, s.pubsub} {
		if e == nil || e.cmd == nil {
			continue
		}
		wg.Go(func() {
			if err := e.stop(); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("stop %s emulator: %w", e.kind, err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// ResetFirestore deletes every document of project's (default) database.
func (s *Set) ResetFirestore(ctx context.Context, project string) error {
	host := s.FirestoreHost()
	if host == "" {
		return errors.New("reset firestore: the set has no firestore emulator")
	}
	u := "http://" + host + "/emulator/v1/projects/" + url.PathEscape(project) + "/databases/(default)/documents"
	if err := call(ctx, http.MethodDelete, u, nil); err != nil {
		return fmt.Errorf("reset firestore project %s: %w", project, err)
	}
	return nil
}

// Exports are written under partialPrefix and renamed to exportPrefix once complete, so that a
// crash in the middle of one leaves a directory Start ignores (and the next save removes).
const (
	exportPrefix  = "export-"
	partialPrefix = "partial-"
)

// saveFirestore exports under a new name and only then removes older exports, so a failed
// export never costs the previous one.
func (s *Set) saveFirestore() error {
	s.saveMu.Lock()
	defer s.saveMu.Unlock()
	dir := filepath.Join(s.dataDir, "firestore")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("save firestore data: %w", err)
	}
	// Fixed width keeps lexical order equal to time order for latestExport.
	stamp := fmt.Sprintf("%019d", time.Now().UnixNano())
	body, err := json.Marshal(map[string]string{
		"database":         "projects/" + s.project + "/databases/(default)",
		"export_directory": dir,
		"export_name":      partialPrefix + stamp,
	})
	if err != nil {
		return fmt.Errorf("save firestore data: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	u := "http://" + s.firestore.host + "/emulator/v1/projects/" + url.PathEscape(s.project) + ":export"
	if err := call(ctx, http.MethodPost, u, body); err != nil {
		return fmt.Errorf("save firestore data to %s: %w", dir, err)
	}
	// The export's files name each other by relative paths, so the directory may move.
	name := exportPrefix + stamp
	if err := os.Rename(filepath.Join(dir, partialPrefix+stamp), filepath.Join(dir, name)); err != nil {
		return fmt.Errorf("save firestore data: %w", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("save firestore data: %w", err)
	}
	for _, ent := range entries {
		old := strings.HasPrefix(ent.Name(), exportPrefix) || strings.HasPrefix(ent.Name(), partialPrefix)
		if ent.IsDir() && old && ent.Name() != name {
			if err := os.RemoveAll(filepath.Join(dir, ent.Name())); err != nil {
				return fmt.Errorf("remove old firestore export: %w", err)
			}
		}
	}
	return nil
}

// latestExport returns the metadata file of the newest complete export in dir, or "".
func latestExport(dir string) (string, error) {
	matches, err := filepath.Glob(filepath.Join(dir, exportPrefix+"*", "*.overall_export_metadata"))
	if err != nil {
		return "", err
	}
	sort.Strings(matches)
	if len(matches) == 0 {
		return "", nil
	}
	return matches[len(matches)-1], nil
}

func call(ctx context.Context, method, u string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(body))
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: %s: %s", method, u, resp.Status, bytes.TrimSpace(msg))
	}
	return nil
}
