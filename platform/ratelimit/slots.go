package ratelimit

import "sync"

// Slots bounds how many of something run at once in this process: at most PerName for one name
// (a user) and Total in all. Unlike a Limit it is not shared between instances: what it guards
// is this process's CPU or memory, which a request spread over other instances does not spend.
// Take never waits, so a caller over the bound is refused at once rather than queued behind the
// work that holds the slots.
type Slots struct {
	PerName, Total int

	mu    sync.Mutex
	held  map[string]int
	total int
}

// NewSlots is PerName slots a name and Total in all; a bound below 1 is taken as 1.
func NewSlots(perName, total int) *Slots {
	return &Slots{PerName: max(perName, 1), Total: max(total, 1), held: map[string]int{}}
}

// Take takes a slot for name, or answers false when name already holds PerName or the process
// Total. release gives the slot back; calling it more than once gives it back once.
func (s *Slots) Take(name string) (release func(), ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held[name] >= s.PerName || s.total >= s.Total {
		return nil, false
	}
	s.held[name]++
	s.total++
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.total--
			if s.held[name]--; s.held[name] <= 0 {
				delete(s.held, name) // the map holds only the names running now
			}
		})
	}, true
}
