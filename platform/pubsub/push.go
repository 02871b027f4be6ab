package pubsub

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// pushEnvelope is the body of a push request, as Pub/Sub sends it: the message with its data
// base64-encoded (encoding/json decodes []byte from base64), and the delivery attempt at the
// top level when the subscription has a dead-letter policy.
type pushEnvelope struct {
	Message struct {
		Data        []byte            `json:"data"`
		Attributes  map[string]string `json:"attributes"`
		MessageID   string            `json:"messageId"`
		PublishTime time.Time         `json:"publishTime"`
	} `json:"message"`
	Subscription    string `json:"subscription"`
	DeliveryAttempt int    `json:"deliveryAttempt"`
}

// maxPushBytes bounds a push request: Pub/Sub's largest message (10 MB) in base64, with room
// for its attributes.
const maxPushBytes = 16 << 20

// PushHandler serves a push subscription's endpoint: it decodes each request into a Message and
// answers 204 when h returns nil, which acknowledges it, and 500 when h fails, which has Pub/Sub
// deliver it again after the subscription's backoff. A request that is not a push envelope gets
// 400 (also a redelivery: Pub/Sub acknowledges only 2xx; a dead-letter policy ends it).
// Authenticating Pub/Sub is the platform's job in production: Cloud Run checks the
// subscription's OIDC token before the request arrives here.
func PushHandler(h Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "push requests are POSTs", http.StatusMethodNotAllowed)
			return
		}
		var env pushEnvelope
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxPushBytes)).Decode(&env); err != nil {
			http.Error(w, fmt.Sprintf("not a Pub/Sub push request: %v", err), http.StatusBadRequest)
			return
		}
		if env.Message.MessageID == "" {
			http.Error(w, "not a Pub/Sub push request: message.messageId is missing", http.StatusBadRequest)
			return
		}
		m := Message{
			ID: env.Message.MessageID, Data: env.Message.Data, Attributes: env.Message.Attributes,
			DeliveryAttempt: env.DeliveryAttempt, PublishTime: env.Message.PublishTime,
		}
		if err := handle(r.Context(), env.Subscription, h, m); err != nil {
			// The cause is the handler's to log; Pub/Sub shows nobody this body.
			http.Error(w, "handler failed; Pub/Sub will deliver the message again", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}
