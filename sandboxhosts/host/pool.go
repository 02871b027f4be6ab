package host

import (
	"context"
	"slices"
	"sync"
	"time"
)

// warmAge is how long a warm sandbox waits for a session before it is replaced: the pool skips
// resolving the image reference again, so a tag moved meanwhile starts its previous digest for
// at most this long.
const warmAge = 10 * time.Minute

// warmImages is how many images the pool keeps warm sandboxes for: the most recently started.
const warmImages = 4

// refillAfterTake is how long the pool waits, after a session took one of its sandboxes,
// before it boots the next: a boot keeps a core busy for tens of milliseconds (mount, runc,
// supervisor), and the session that just started is waiting for its first command meanwhile.
const refillAfterTake = 100 * time.Millisecond

// pool keeps booted sandboxes of recently used images, with nothing of any session in them, so
// that CreateSession skips the ~40 ms of overlay mount, runc start and supervisor start. A
// sandbox's session-specific parts (its event log, its environment, given to each exec) are
// attached when it is taken.
type pool struct {
	h    *Host
	size int
	ctx  context.Context
	stop context.CancelFunc
	wg   sync.WaitGroup

	mu      sync.Mutex
	ready   map[string][]*sandbox
	recent  []string // image references, most recent last
	filling map[string]bool
}

func newPool(h *Host, size int, images []string) *pool {
	ctx, stop := context.WithCancel(context.Background())
	p := &pool{h: h, size: size, ctx: ctx, stop: stop, ready: map[string][]*sandbox{}, filling: map[string]bool{}}
	for _, ref := range images {
		p.refill(ref, 0)
	}
	return p
}

// take returns a live warm sandbox of ref, or nil.
func (p *pool) take(ref string) *sandbox {
	p.mu.Lock()
	defer p.mu.Unlock()
	for list := p.ready[ref]; len(list) > 0; list = p.ready[ref] {
		sbx := list[0]
		p.ready[ref] = list[1:]
		select {
		case <-sbx.sb.Exited(): // died while it waited
		default:
			if p.h.clock.Now().Sub(sbx.booted) < warmAge {
				return sbx
			}
		}
		p.discard(sbx)
	}
	return nil
}

// refill marks ref as recently used and, in the background after delay, tops its warm
// sandboxes up to the pool's size; the least recently used image beyond warmImages loses its
// sandboxes.
func (p *pool) refill(ref string, delay time.Duration) {
	if p.size <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ctx.Err() != nil {
		return
	}
	p.recent = append(slices.DeleteFunc(p.recent, func(r string) bool { return r == ref }), ref)
	if len(p.recent) > warmImages {
		old := p.recent[0]
		p.recent = p.recent[1:]
		for _, sbx := range p.ready[old] {
			p.discard(sbx)
		}
		delete(p.ready, old)
	}
	if p.filling[ref] {
		return
	}
	p.filling[ref] = true
	p.wg.Go(func() {
		if delay > 0 {
			wait := time.NewTimer(delay)
			defer wait.Stop()
			select {
			case <-wait.C:
			case <-p.ctx.Done():
			}
		}
		p.fill(ref)
	})
}

// fill boots sandboxes of ref until the pool holds size of them. A failure ends the round: the
// next session of the image boots cold and tries again.
func (p *pool) fill(ref string) {
	defer func() {
		p.mu.Lock()
		delete(p.filling, ref)
		p.mu.Unlock()
	}()
	for {
		p.mu.Lock()
		enough := len(p.ready[ref]) >= p.size || !slices.Contains(p.recent, ref) || p.ctx.Err() != nil
		p.mu.Unlock()
		if enough {
			return
		}
		img, err := p.h.images.Pull(p.ctx, ref)
		if err != nil {
			p.h.log.Warn("warm pool: pull", "image", ref, "err", err)
			return
		}
		sbx, _, err := p.h.boot(p.ctx, img, nil)
		if err != nil {
			if p.ctx.Err() == nil {
				p.h.log.Warn("warm pool: boot", "image", ref, "err", err)
			}
			return
		}
		p.mu.Lock()
		if p.ctx.Err() != nil || !slices.Contains(p.recent, ref) {
			p.discard(sbx)
		} else {
			p.ready[ref] = append(p.ready[ref], sbx)
		}
		p.mu.Unlock()
	}
}

// discard removes a warm sandbox in the background; p.mu is held.
func (p *pool) discard(sbx *sandbox) {
	p.wg.Go(func() {
		if err := p.h.remove(context.Background(), sbx); err != nil {
			p.h.log.Warn("warm pool: remove", "sandbox", sbx.sb.ID(), "err", err)
		}
	})
}

// retain removes the warm sandboxes of images whose digest keep lacks, and forgets their
// references, so that nothing of a collected image stays booted; it returns when they are gone.
func (p *pool) retain(keep map[string]bool) {
	var doomed []*sandbox
	p.mu.Lock()
	for ref, list := range p.ready {
		kept := list[:0]
		for _, sbx := range list {
			if keep[sbx.digest] {
				kept = append(kept, sbx)
			} else {
				doomed = append(doomed, sbx)
			}
		}
		if len(kept) == 0 {
			delete(p.ready, ref)
			p.recent = slices.DeleteFunc(p.recent, func(r string) bool { return r == ref })
		} else {
			p.ready[ref] = kept
		}
	}
	p.mu.Unlock()
	for _, sbx := range doomed {
		if err := p.h.remove(context.Background(), sbx); err != nil {
			p.h.log.Warn("warm pool: remove", "sandbox", sbx.sb.ID(), "err", err)
		}
	}
}

// close stops filling and removes every warm sandbox.
func (p *pool) close() {
	p.mu.Lock()
	p.stop()
	for ref, list := range p.ready {
		for _, sbx := range list {
			p.discard(sbx)
		}
		delete(p.ready, ref)
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// KeepWarm keeps warm sandboxes of the image ref from now on, as if a session had just started
// from it: for an image that becomes known after the host started, such as an enabled image's
// reference by digest, which is what its sessions start from.
func (h *Host) KeepWarm(ref string) { h.pool.refill(ref, 0) }

// Warm counts the warm sandboxes of the image ref ready on this host; kept says whether the
// pool keeps ref warm at all (it is among the images sessions recently started from).
func (h *Host) Warm(ref string) (ready int, kept bool) {
	h.pool.mu.Lock()
	defer h.pool.mu.Unlock()
	return len(h.pool.ready[ref]), slices.Contains(h.pool.recent, ref)
}
