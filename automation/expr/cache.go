package expr

import (
	"container/list"
	"sync"
)

// cache is a bounded least-recently-used map from source text to what it compiles to. Each
// entry is built once even when many goroutines ask for it at the same moment; failures are
// kept too, so a bad expression is not recompiled on every validation.
type cache[V any] struct {
	mu      sync.Mutex
	max     int
	entries map[string]*list.Element
	order   list.List // of *cacheEntry[V], most recently used first
}

type cacheEntry[V any] struct {
	key  string
	once sync.Once
	val  V
	err  error
}

func newCache[V any](max int) *cache[V] {
	return &cache[V]{max: max, entries: make(map[string]*list.Element, max)}
}

func (c *cache[V]) get(key string, build func() (V, error)) (V, error) {
	c.mu.Lock()
	el, ok := c.entries[key]
	if ok {
		c.order.MoveToFront(el)
	} else {
		el = c.order.PushFront(&cacheEntry[V]{key: key})
		c.entries[key] = el
		if c.order.Len() > c.max {
			oldest := c.order.Back()
			c.order.Remove(oldest)
			delete(c.entries, oldest.Value.(*cacheEntry[V]).key)
		}
	}
	ent := el.Value.(*cacheEntry[V])
	c.mu.Unlock()
	ent.once.Do(func() { ent.val, ent.err = build() })
	return ent.val, ent.err
}
