// Package config reads Hangar's settings from the environment, once, into one struct: addresses,
// the Google Cloud project, and every limit the API enforces, so that all of them live in one
// place (and in the README's configuration table).
package config

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/hangar-dev/hangar/functions/platform/paging"
)

// Config is everything a function needs to know about its deployment.
type Config struct {
	// Project is the Google Cloud project whose Firestore and Pub/Sub hold Hangar's data.
	Project string
	// Limits bounds every list, request and cache.
	Limits Limits
}

// Limits are the API's bounds. Each has a default here and an environment override.
type Limits struct {
	Tasks    paging.Bounds
	Profiles paging.Bounds
	ApiKeys  paging.Bounds
	// MaxRequestBytes caps the size of one request message.
	MaxRequestBytes int
	// AuthCacheTTL is how long a verified key is trusted without reading Firestore again; a key
	// revoked on another instance stops working within this time, on this one at once.
	AuthCacheTTL time.Duration
	// MaxProfileEnvVars, MaxProfileListItems and MaxValueBytes bound a profile's contents.
	MaxProfileEnvVars   int
	MaxProfileListItems int
	MaxValueBytes       int
	// MaxPromptBytes bounds a task's prompt.
	MaxPromptBytes int
	// TaskTreeDepth bounds how deep a task tree grows, so an agent splitting work recursively
	// stops with a clear error instead of growing a tree nobody can read.
	TaskTreeDepth int
	// TaskDescendants bounds the descendants GetTask returns, oldest first.
	TaskDescendants int
	// TaskListOffset bounds how deep ListTasks pages go, as search APIs do: Firestore reads (and
	// bills) every task an offset skips.
	TaskListOffset int
}

// Default is the configuration with no environment.
func Default() Config {
	return Config{
		Project: "hangar-local",
		Limits: Limits{
			Tasks:               paging.Bounds{Default: 50, Max: 200},
			Profiles:            paging.Bounds{Default: 100, Max: 500},
			ApiKeys:             paging.Bounds{Default: 100, Max: 1000},
			MaxRequestBytes:     4 << 20,
			AuthCacheTTL:        10 * time.Second,
			MaxProfileEnvVars:   200,
			MaxProfileListItems: 100,
			MaxValueBytes:       32 << 10,
			MaxPromptBytes:      256 << 10,
			TaskTreeDepth:       10,
			TaskDescendants:     1000,
			TaskListOffset:      10000,
		},
	}
}

// FromEnv is Default overridden by HANGAR_* variables (and GOOGLE_CLOUD_PROJECT).
func FromEnv() (Config, error) {
	c := Default()
	if p := os.Getenv("GOOGLE_CLOUD_PROJECT"); p != "" {
		c.Project = p
	}
	if p := os.Getenv("HANGAR_PROJECT"); p != "" {
		c.Project = p
	}
	ints := []struct {
		env string
		dst *int
	}{
		{"HANGAR_TASKS_PAGE_SIZE_MAX", &c.Limits.Tasks.Max},
		{"HANGAR_MAX_REQUEST_BYTES", &c.Limits.MaxRequestBytes},
		{"HANGAR_MAX_PROMPT_BYTES", &c.Limits.MaxPromptBytes},
	}
	for _, e := range ints {
		v, ok := os.LookupEnv(e.env)
		if !ok {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return c, fmt.Errorf("%s=%q: want a positive whole number", e.env, v)
		}
		*e.dst = n
	}
	if v, ok := os.LookupEnv("HANGAR_AUTH_CACHE_TTL"); ok {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return c, fmt.Errorf("HANGAR_AUTH_CACHE_TTL=%q: want a duration such as 10s", v)
		}
		c.Limits.AuthCacheTTL = d
	}
	return c, nil
}
