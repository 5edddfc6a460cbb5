package transport

import (
	"crypto/sha256"
	"slices"

	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"

	"github.com/conclave-ai/conclave/messages"
)

// Tokens maps bearer tokens to tenants. Tokens are kept only as SHA-256
// digests, and looked up by digest, so comparing a presented token takes
// the same time whatever it shares with a real one.
type Tokens struct {
	byDigest map[[sha256.Size]byte]messages.TenantID
	// raw are the tokens themselves, for Secrets only (lookups compare
	// digests).
	raw []string
}

// Secrets are the tokens, for masking them wherever they might be
// recorded or shown (actors.Config.Secrets, internal/redact).
func (t Tokens) Secrets() []string { return slices.Clone(t.raw) }

// Len is the number of tokens.
func (t Tokens) Len() int { return len(t.byDigest) }

// Add maps token to tenant.
func (t *Tokens) Add(token string, tenant messages.TenantID) error {
	if len(token) < 16 {
		return errors.New("transport: a token must be at least 16 characters")
	}
	if _, err := messages.NewTenantID(string(tenant)); err != nil {
		return err
	}
	if t.byDigest == nil {
		t.byDigest = map[[sha256.Size]byte]messages.TenantID{}
	}
	t.byDigest[sha256.Sum256([]byte(token))] = tenant
	t.raw = append(t.raw, token)
	return nil
}

func (t Tokens) lookup(token string) (messages.TenantID, bool) {
	tenant, ok := t.byDigest[sha256.Sum256([]byte(token))]
	return tenant, ok
}

// TokensFile is the JSON shape of a tokens file:
//
//	{"tokens": {"<token>": "<tenant>", ...}}
type TokensFile struct {
	Tokens map[string]messages.TenantID `json:"tokens"`
}

// LoadTokens reads tokens from a JSON file (path may be empty) and from an
// environment value of the form "tenant:token,tenant:token" (may be empty).
func LoadTokens(path, env string) (Tokens, error) {
	var t Tokens
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return Tokens{}, fmt.Errorf("transport: tokens file: %w", err)
		}
		var f TokensFile
		if err := decodeStrict(b, &f); err != nil {
			return Tokens{}, fmt.Errorf("transport: tokens file %s: %s", path, err.Message)
		}
		for tok, tenant := range f.Tokens {
			if err := t.Add(tok, tenant); err != nil {
				return Tokens{}, fmt.Errorf("transport: tokens file %s: %w", path, err)
			}
		}
	}
	for _, pair := range strings.Split(env, ",") {
		pair = strings.TrimSpace(pair)
		if pair == "" {
			continue
		}
		tenant, tok, ok := strings.Cut(pair, ":")
		if !ok {
			return Tokens{}, errors.New(`transport: CONCLAVE_TOKENS entries must be "tenant:token"`)
		}
		if err := t.Add(tok, messages.TenantID(tenant)); err != nil {
			return Tokens{}, err
		}
	}
	return t, nil
}

// authenticate finds the caller's tenant. Without tokens every caller is
// the local tenant (the server then only listens on loopback). The token
// comes from "Authorization: Bearer <token>", or, where queryToken is set
// (the SSE and WebSocket endpoints: browsers' EventSource and WebSocket
// cannot set headers), from ?access_token=. Elsewhere an access_token
// parameter is refused: it would end up in access logs for no reason.
func (s *Server) authenticate(r *http.Request, queryToken bool) (messages.TenantID, *apiError) {
	if s.cfg.Tokens.Len() == 0 {
		return messages.LocalTenant, nil
	}
	q := r.URL.Query()
	if !queryToken && q.Has("access_token") {
		return "", errorf(http.StatusUnauthorized, codeUnauthorized,
			"?access_token= is accepted only on the stream endpoints (/api/v1/events/stream, /api/v1/events/ws); send Authorization: Bearer <token>")
	}
	tok := ""
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, rest, ok := strings.Cut(h, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			return "", errorf(http.StatusUnauthorized, codeUnauthorized, "Authorization must be a Bearer token")
		}
		tok = strings.TrimSpace(rest)
	} else if queryToken {
		tok = q.Get("access_token")
	}
	if tok == "" {
		return "", errorf(http.StatusUnauthorized, codeUnauthorized, "a bearer token is required")
	}
	tenant, ok := s.cfg.Tokens.lookup(tok)
	if !ok {
		return "", errorf(http.StatusUnauthorized, codeUnauthorized, "unknown token")
	}
	return tenant, nil
}

// IsLoopback reports whether addr (host:port) binds only loopback
// addresses. An empty host binds every interface, so it is not loopback.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
