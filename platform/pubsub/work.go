package pubsub

import (
	"context"
	"log/slog"
	"time"

	"golang.org/x/sync/errgroup"
)

// Work runs a worker by streaming pull, as `hangar dev` and tests do (on Cloud Run the same
// handlers are pushed to instead): it pulls each topic's worker subscription into its handler
// and calls tick every period, until ctx ends (nil then) or a receive fails. A tick's error is
// logged under name and not returned: the next tick tries again.
func (c *Client) Work(ctx context.Context, name string, handlers map[string]Handler, period time.Duration, tick func(context.Context) error, log *slog.Logger) error {
	g, ctx := errgroup.WithContext(ctx)
	for topic, h := range handlers {
		g.Go(func() error { return c.Receive(ctx, WorkerSubscription(topic), h) })
	}
	g.Go(func() error {
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-t.C:
				if err := tick(ctx); err != nil && ctx.Err() == nil {
					log.Warn(name+" tick", "err", err)
				}
			}
		}
	})
	err := g.Wait()
	if ctx.Err() != nil {
		return nil
	}
	return err
}
