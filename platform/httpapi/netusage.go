package httpapi

// NetworkUsage is NetworkUsagePath's answer: the session's egress totals since it was created,
// across every sandbox it had, as of the net.usage event at EventIdx (0 and no AsOf when the
// session has made no connection yet). It is a route beside the Session message, as container
// platforms keep a container's stats apart from its description, because Session's fields are
// the API's fixed contract.
type NetworkUsage struct {
	SessionID string `json:"session_id"`
	NetworkTotals
	AsOf     string `json:"as_of,omitempty"`
	EventIdx int64  `json:"event_idx"`
}

// NetworkTotals are a sandbox's egress proxy counters, as its net.usage events carry them.
type NetworkTotals struct {
	BytesOut           int64 `json:"bytes_out"`
	BytesIn            int64 `json:"bytes_in"`
	ConnectionsAllowed int64 `json:"connections_allowed"`
	ConnectionsDenied  int64 `json:"connections_denied"`
}

// Plus is t and u added up.
func (t NetworkTotals) Plus(u NetworkTotals) NetworkTotals {
	return NetworkTotals{BytesOut: t.BytesOut + u.BytesOut, BytesIn: t.BytesIn + u.BytesIn,
		ConnectionsAllowed: t.ConnectionsAllowed + u.ConnectionsAllowed,
		ConnectionsDenied:  t.ConnectionsDenied + u.ConnectionsDenied}
}
