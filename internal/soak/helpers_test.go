package soak

import (
	"net/http"
	"time"
)

// newTestHTTPClient is a client whose connections the test closes: none
// are kept idle.
func newTestHTTPClient() *http.Client {
	return &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
}
