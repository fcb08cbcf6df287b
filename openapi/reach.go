package openapi

import (
	"net/http"

	"github.com/quiverhq/quiver/internal/netguard"
)

// transport is what a source's requests go through: its own Transport, else the default
// one, or, for a PublicOnly source, a transport whose dialer refuses internal addresses.
func transport(src Source) http.RoundTripper {
	if src.Transport != nil || !src.PublicOnly {
		return src.Transport
	}
	return netguard.Transport(src.Internal, "quiver serve --openapi-internal-hosts")
}
