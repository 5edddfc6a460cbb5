package transport

import (
	"fmt"
	"net/http"

	"github.com/conclave-ai/conclave/messages"
)

// The Server's parts, one http.Handler each, for a program that mounts
// them on its own mux with its own authentication (the root package
// conclave does). Each handler serves its endpoint whatever path it is
// mounted at, except APIHandler, which routes by the paths of docs/api.md.
// They share the Server's streams, stream caps, CORS settings and metrics,
// and Server.Shutdown ends whatever they serve. The connection limits
// (MaxConnections, the timeouts) belong to the embedder's http.Server.

// Authenticate finds the tenant of a request to one of the Server's
// handlers. An error refuses the request with 401 unauthorized, the
// error's text as its message (answered at once, body unread, connection
// closed). An empty tenant is messages.LocalTenant; a tenant that is not a
// valid messages.TenantID is refused with 500. A nil Authenticate admits
// every caller as messages.LocalTenant. It is called on the request's
// goroutine and must be safe for concurrent use.
type Authenticate func(*http.Request) (messages.TenantID, error)

// tenantOf adapts a to the handlers' authentication.
func (a Authenticate) tenantOf(r *http.Request) (messages.TenantID, *apiError) {
	if a == nil {
		return messages.LocalTenant, nil
	}
	tenant, err := a(r)
	switch {
	case err != nil:
		return "", errorf(http.StatusUnauthorized, codeUnauthorized, err.Error())
	case tenant == "":
		return messages.LocalTenant, nil
	}
	if _, err := messages.NewTenantID(string(tenant)); err != nil {
		return "", errorf(http.StatusInternalServerError, codeInternal, fmt.Sprintf("the server's authentication gave an invalid tenant: %v", err))
	}
	return tenant, nil
}

// wrap authenticates h's requests with auth.
func (a Authenticate) wrap(h authedHandler) http.HandlerFunc { return authWith(a.tenantOf, h) }

// embedded is what every handler goes through: CORS, and the read
// deadline lifted once a request's body is in (limits.go).
func (s *Server) embedded(h http.Handler) http.Handler { return s.cors(readDeadlineDone(h)) }

// APIHandler serves the runs and interrupts API of docs/api.md, routed by
// its paths: /api/v1/runs…, /api/v1/interrupts… and
// /api/v1/events/resume/{id}; anything else is 404. Mount it at "/api/v1/"
// (a more specific pattern, such as the SSE endpoint's, still wins).
// A created run's stream_url and ws_url name /api/v1/events/stream and
// /api/v1/events/ws on the request's host.
func (s *Server) APIHandler(auth Authenticate) http.Handler {
	mux := newRouteTable()
	s.apiRoutes(mux, auth.wrap)
	mux.handle("/", nil, http.HandlerFunc(notFound))
	return s.embedded(mux.mux)
}

// SSEHandler serves a session's event stream as Server-Sent Events (GET,
// the query and headers of /api/v1/events/stream), whatever its path.
func (s *Server) SSEHandler(auth Authenticate) http.Handler {
	return s.embedded(s.sseEndpoint(auth.wrap))
}

// WebSocketHandler serves a session's event stream over a WebSocket (GET,
// the protocol of /api/v1/events/ws), whatever its path.
func (s *Server) WebSocketHandler(auth Authenticate) http.Handler {
	return s.embedded(s.wsEndpoint(auth.wrap))
}

// AGUIHandler serves AG-UI runs (POST, the body of /api/v1/agui), whatever
// its path.
func (s *Server) AGUIHandler(auth Authenticate) http.Handler {
	return s.embedded(s.aguiEndpoint(auth.wrap))
}

// A2AHandler serves A2A: the agent card on GET and HEAD, JSON-RPC on POST,
// whatever its path. The card names a2a.RPCPath on the request's host as
// the RPC endpoint, so mount it at a2a.RPCPath and a2a.CardPath. The card
// advertises bearer authentication only when the Server has Tokens.
func (s *Server) A2AHandler(auth Authenticate) http.Handler {
	rpc := s.preAuthA2A(auth.tenantOf, s.a2a.RPC())
	card := s.a2a.Card()
	return s.embedded(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			rpc.ServeHTTP(w, r)
			return
		}
		card.ServeHTTP(w, r) // answers 405 to anything but GET and HEAD
	}))
}
