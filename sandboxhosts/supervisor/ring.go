package supervisor

// ring holds the newest max bytes of a stream addressed by absolute offset. The byte at offset o
// always sits at buf[o%max], so growing by append until full and wrapping afterwards need no
// copying of what is already held.
type ring struct {
	buf []byte
	max int
	end int64 // offset after the last byte written
}

func newRing(max int) ring { return ring{max: max} }

// start is the oldest offset still held.
func (r *ring) start() int64 { return r.end - int64(len(r.buf)) }

func (r *ring) write(p []byte) {
	if len(p) >= r.max {
		// Only the tail survives; lay it out so that offset o lands at o%max.
		r.end += int64(len(p))
		p = p[len(p)-r.max:]
		r.ensureFull()
		r.put(r.end-int64(len(p)), p)
		return
	}
	if r.end+int64(len(p)) <= int64(r.max) {
		r.buf = append(r.buf, p...)
		r.end += int64(len(p))
		return
	}
	r.ensureFull()
	r.put(r.end, p)
	r.end += int64(len(p))
}

func (r *ring) ensureFull() {
	if len(r.buf) < r.max {
		r.buf = append(r.buf, make([]byte, r.max-len(r.buf))...)
	}
}

// put copies p to the slots of offsets [off, off+len(p)), wrapping once at most.
func (r *ring) put(off int64, p []byte) {
	i := int(off % int64(r.max))
	n := copy(r.buf[i:], p)
	copy(r.buf, p[n:])
}

// readAt copies held bytes from offset off into p and returns how many. The caller checks that
// off is within [start, end].
func (r *ring) readAt(p []byte, off int64) int {
	n := int(min(int64(len(p)), r.end-off))
	if n <= 0 {
		return 0
	}
	i := int(off % int64(r.max))
	c := copy(p[:n], r.buf[i:])
	copy(p[c:n], r.buf)
	return n
}
