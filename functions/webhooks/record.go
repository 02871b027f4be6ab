package webhooks

import (
	"strings"
	"time"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/platform/clock"
	"github.com/hangar-dev/hangar/platform/httpapi"
)

// record is a registration as Firestore stores it.
type record struct {
	ID       string `firestore:"id"`
	Name     string `firestore:"name"`
	Provider string `firestore:"provider"`
	// SealedSecret is the signing secret sealed for the registration (sealOwner), so that a
	// database read alone cannot forge deliveries.
	SealedSecret    []byte    `firestore:"sealed_secret"`
	CreatedBy       string    `firestore:"created_by"`
	CreatedAt       time.Time `firestore:"created_at"`
	UpdatedAt       time.Time `firestore:"updated_at"`
	SecretRotatedAt time.Time `firestore:"secret_rotated_at"`
	// LastDeliveryAt is the zero time until a delivery verifies.
	LastDeliveryAt time.Time `firestore:"last_delivery_at"`
}

// URLPath is where a registration's sender posts.
func URLPath(id string) string {
	return strings.Replace(httpapi.InboundWebhookPath, "{id}", id, 1)
}

func (r record) proto() *appv1.WebhookRegistration {
	return &appv1.WebhookRegistration{
		Id: r.ID, Name: r.Name, Provider: r.Provider, UrlPath: URLPath(r.ID),
		CreatedByUserId: r.CreatedBy, CreatedAt: clock.Format(r.CreatedAt), UpdatedAt: clock.Format(r.UpdatedAt),
		LastDeliveryAt: clock.FormatPtr(r.LastDeliveryAt), SecretRotatedAt: clock.Format(r.SecretRotatedAt),
	}
}

// sealOwner binds a sealed secret to its registration: copied onto another one, it does not open.
func sealOwner(id string) string { return collection + "/" + id }
