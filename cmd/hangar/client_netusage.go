package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hangar-dev/hangar/platform/httpapi"
)

func newSessionsNetUsageCmd(f *clientFlags) *cobra.Command {
	return idCmd(f, "net-usage ID", "Show the session's network totals through the egress proxy (GET /api/v1/sessions/<id>/network-usage)",
		func(c *apiClient, _ *cobra.Command, id string) error { return c.netUsage(id) })
}

// netUsage prints the session's network-usage route: as JSON with --json, else a line each.
func (c *apiClient) netUsage(id string) error {
	req, err := http.NewRequestWithContext(c.ctx, http.MethodGet, c.url+strings.Replace(httpapi.NetworkUsagePath, "{id}", url.PathEscape(id), 1), nil)
	if err != nil {
		return err
	}
	req.Header.Set(httpapi.APIKeyHeader, c.key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("network usage of %s: %w", id, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return routeError(resp, fmt.Errorf("network usage of %s: %s", id, resp.Status))
	}
	var u httpapi.NetworkUsage
	if err := json.NewDecoder(resp.Body).Decode(&u); err != nil {
		return fmt.Errorf("network usage of %s: %w", id, err)
	}
	if c.json {
		return json.NewEncoder(c.out).Encode(u)
	}
	fmt.Fprintf(c.out, "bytes_out: %d\nbytes_in: %d\nconnections_allowed: %d\nconnections_denied: %d\nas_of: %s\n",
		u.BytesOut, u.BytesIn, u.ConnectionsAllowed, u.ConnectionsDenied, u.AsOf)
	return nil
}
